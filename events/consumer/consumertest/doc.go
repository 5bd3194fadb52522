// Package consumertest holds the test helpers of the consumer runtime:
// a Manager wired to a controlplanetest.Env.
package consumertest
