// Package web serves the history projections over HTTP: a JSON API for
// tools (timeline, audit, state at a point, diff, progress, and a
// Server-Sent Events stream of the head revision) and the timeline page, a
// static HTML page with a small script (embedded, no framework) that draws
// an object's causal chain as SVG: one row per object (deployment,
// replicasets, pods), a mark per change coloured by class, arrows from
// cause to effect with their latency, redrawn as new events arrive.
package web
