package producer

import (
	"context"

	"github.com/idemq/idemq/idgen"
)

// IDGenerator issues unique IDs; *idgen.Generator is one.
type IDGenerator interface {
	Next(ctx context.Context) (idgen.ID, error)
}

// IDKeys returns a KeySource whose keys are gen's IDs in decimal: unique per
// generator node, time-ordered, and safe to hand to JavaScript as strings.
func IDKeys(gen IDGenerator) KeySource { return idKeys{gen} }

type idKeys struct{ gen IDGenerator }

func (k idKeys) NextKey(ctx context.Context) (string, error) {
	id, err := k.gen.Next(ctx)
	if err != nil {
		return "", err
	}
	return id.String(), nil
}
