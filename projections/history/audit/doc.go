// Package audit answers "who changed what, and when" from the history store:
// every change by people and components alike, filtered by user, verb,
// kind or resource, namespace and time. Queries by user read only that
// user's index; other queries scan the summaries of the revision range that
// since/until select.
package audit
