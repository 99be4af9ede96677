// Package registry reads container registries: the tags of a repository
// and the metadata (digest, creation time) of the images they name.
//
// Not built yet: see the README's feature table ([core] and [registry]).
package registry
