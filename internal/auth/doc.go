// Package auth decides who is calling fluxd. A tokens file maps the SHA-256
// hash of each bearer token to an instance ID and a role; the plain token is
// shown once, when it is created, and never stored. Lookups hash the
// presented token and compare it against every stored hash in constant time,
// so neither a match nor its position leaks through timing.
package auth
