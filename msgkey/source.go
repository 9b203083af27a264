package msgkey

import (
	"context"

	"github.com/idemq/idemq/idgen"
)

// Source issues unique keys, one per call: the producer adapters take a
// new message's key from one. Implementations are safe for concurrent use.
type Source interface {
	NextKey(ctx context.Context) (string, error)
}

// IDGenerator issues unique IDs; *idgen.Generator is one.
type IDGenerator interface {
	Next(ctx context.Context) (idgen.ID, error)
}

// FromIDs returns a Source whose keys are gen's IDs in decimal: unique per
// generator node, time-ordered, and safe to hand to JavaScript as strings.
func FromIDs(gen IDGenerator) Source { return idKeys{gen} }

type idKeys struct{ gen IDGenerator }

func (k idKeys) NextKey(ctx context.Context) (string, error) {
	id, err := k.gen.Next(ctx)
	if err != nil {
		return "", err
	}
	return id.String(), nil
}
