// Package layers holds no code: its test is docs/architecture.md's layer
// diagram, checked. It lists, for every package of the module, the
// module's packages it may import, and the outside libraries only
// adapters may import. A new package, or a new arrow between two, is a
// line added to that table on purpose, in review.
package layers
