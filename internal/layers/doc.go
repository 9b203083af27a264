// Package layers holds the test that keeps each layer of idemq to its import
// rule: cores link no client library, each client adapter links only its own
// client, each backend only its own driver. It has no code of its own.
package layers
