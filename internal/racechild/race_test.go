//go:build race

package racechild

func init() { raceEnabled = true }
