package msgkey

import (
	"context"
	"strconv"
)

// Source issues unique keys, one per call: the producer adapters take a
// new message's key from one. Implementations are safe for concurrent use.
// There is no default: [FromIDs] over an ID generator (package idgen, on a
// node id of the process's own) is the usual one.
type Source interface {
	NextKey(ctx context.Context) (string, error)
}

// FromIDs returns a Source whose keys are gen's IDs in decimal: with a
// snowflake generator (*idgen.Generator, idgen/cached's Generator) they are
// unique per node, time-ordered, and safe to hand to JavaScript as strings.
// The ID type is inferred from gen's Next method:
//
//	keys := msgkey.FromIDs(gen)
func FromIDs[T ~int64 | ~uint64](gen interface {
	Next(ctx context.Context) (T, error)
}) Source {
	return idKeys[T]{gen}
}

type idKeys[T ~int64 | ~uint64] struct {
	gen interface {
		Next(ctx context.Context) (T, error)
	}
}

func (k idKeys[T]) NextKey(ctx context.Context) (string, error) {
	id, err := k.gen.Next(ctx)
	if err != nil {
		return "", err
	}
	if signed := T(0)-1 < 0; signed {
		return strconv.FormatInt(int64(id), 10), nil
	}
	return strconv.FormatUint(uint64(id), 10), nil
}
