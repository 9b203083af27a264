package brokerfault

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// sendLog records what the senders saw, key by key.
type sendLog struct {
	mu    sync.Mutex
	order []string // keys in the order of their first call
	byKey map[string]*sendState
	// failedAt are the times of the calls that returned an error; errs
	// counts them by error text.
	failedAt []time.Time
	errs     map[string]int
}

type sendState struct {
	broker string    // that stored the copy whose send succeeded
	okAt   time.Time // zero until a send succeeded
	errs   int       // failed calls
	gaveUp bool
}

func (l *sendLog) state(key string) *sendState {
	if l.byKey == nil {
		l.byKey, l.errs = map[string]*sendState{}, map[string]int{}
	}
	s, ok := l.byKey[key]
	if !ok {
		s = &sendState{}
		l.byKey[key] = s
		l.order = append(l.order, key)
	}
	return s
}

func (l *sendLog) ok(key, broker string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.state(key)
	s.broker, s.okAt = broker, at
}

func (l *sendLog) failed(key string, err error, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.state(key).errs++
	l.failedAt = append(l.failedAt, at)
	text := err.Error()
	if len(text) > 160 {
		text = text[:160] + "…"
	}
	l.errs[text]++
}

func (l *sendLog) gaveUp(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.state(key).gaveUp = true
}

// keys returns every key the senders were asked to send.
func (l *sendLog) keys() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.order)
}

func (l *sendLog) gaveUpCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.byKey {
		if s.gaveUp {
			n++
		}
	}
	return n
}

// sentTo returns the broker that stored each key's successful send, and
// when that send returned.
func (l *sendLog) sentTo() map[string]sendState {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]sendState, len(l.byKey))
	for k, s := range l.byKey {
		out[k] = *s
	}
	return out
}

// summary describes the sends around the kill of victim.
func (l *sendLog) summary(victim string, killed, restarted time.Time) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var firstCall, afterErrors, victimBefore, victimDown, victimAfter, others int
	var firstOKAfterKill, firstVictimOKAfterRestart time.Time
	for _, s := range l.byKey {
		if s.okAt.IsZero() {
			continue
		}
		if s.errs == 0 {
			firstCall++
		} else {
			afterErrors++
		}
		switch {
		case s.broker != victim:
			others++
		case s.okAt.Before(killed):
			victimBefore++
		case s.okAt.Before(restarted):
			// Acknowledged as the kill landed.
			victimDown++
		default:
			victimAfter++
			if firstVictimOKAfterRestart.IsZero() || s.okAt.Before(firstVictimOKAfterRestart) {
				firstVictimOKAfterRestart = s.okAt
			}
		}
		if s.okAt.After(killed) && (firstOKAfterKill.IsZero() || s.okAt.Before(firstOKAfterKill)) {
			firstOKAfterKill = s.okAt
		}
	}
	var lastFail time.Time
	for _, at := range l.failedAt {
		if at.After(lastFail) {
			lastFail = at
		}
	}
	var errs []string
	for text, n := range l.errs {
		errs = append(errs, fmt.Sprintf("%d× %s", n, text))
	}
	slices.Sort(errs)
	b := new(strings.Builder)
	fmt.Fprintf(b, "%d keys; sent OK by the first call %d, after failed calls %d; %d calls failed",
		len(l.byKey), firstCall, afterErrors, len(l.failedAt))
	if !lastFail.IsZero() {
		fmt.Fprintf(b, " (the last %v after the kill)", lastFail.Sub(killed).Round(time.Millisecond))
	}
	fmt.Fprintf(b, "; stored on %s before the kill %d, acknowledged while it was down %d, after its restart %d; on the other broker %d",
		victim, victimBefore, victimDown, victimAfter, others)
	if !firstOKAfterKill.IsZero() {
		fmt.Fprintf(b, "; first successful send after the kill %v after it", firstOKAfterKill.Sub(killed).Round(time.Millisecond))
	}
	if !firstVictimOKAfterRestart.IsZero() {
		fmt.Fprintf(b, "; first send stored on %s after its restart %v after the kill (%v after it registered)", victim,
			firstVictimOKAfterRestart.Sub(killed).Round(time.Millisecond), firstVictimOKAfterRestart.Sub(restarted).Round(time.Millisecond))
	}
	if len(errs) > 0 {
		fmt.Fprintf(b, "\nsend errors:\n%s", strings.Join(errs, "\n"))
	}
	return b.String()
}

// applyLog records every effect the handler applied.
type applyLog struct {
	mu    sync.Mutex
	apps  []apply
	first map[string]time.Time
}

type apply struct {
	key, broker string
	at          time.Time
}

func (l *applyLog) add(key, broker string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.apps = append(l.apps, apply{key, broker, at})
	if l.first == nil {
		l.first = map[string]time.Time{}
	}
	if _, ok := l.first[key]; !ok {
		l.first[key] = at
	}
}

// summary describes the effects applied around the kill of victim. sent
// says which broker stored each key's successful send, and when.
func (l *applyLog) summary(victim string, killed, restartBegin time.Time, sent map[string]sendState) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var before, down, after int
	var firstAfter, lastDown time.Time
	for _, a := range l.apps {
		if a.broker != victim {
			continue
		}
		switch {
		case a.at.Before(killed):
			before++
		case a.at.Before(restartBegin):
			down++
			lastDown = a.at
		default:
			after++
			if firstAfter.IsZero() || a.at.Before(firstAfter) {
				firstAfter = a.at
			}
		}
	}
	// Stranded: stored on the victim before the kill, first applied after
	// its restart began.
	stranded := 0
	for k, s := range sent {
		if s.broker == victim && !s.okAt.IsZero() && s.okAt.Before(killed) && l.first[k].After(restartBegin) {
			stranded++
		}
	}
	b := new(strings.Builder)
	fmt.Fprintf(b, "%d effects applied; from %s: %d before the kill, %d while it was down", len(l.apps), victim, before, down)
	if !lastDown.IsZero() {
		fmt.Fprintf(b, " (already pulled; the last %v after the kill)", lastDown.Sub(killed).Round(time.Millisecond))
	}
	fmt.Fprintf(b, ", %d after its restart began", after)
	if !firstAfter.IsZero() {
		fmt.Fprintf(b, " (the first %v after the kill, %v after the restart began)",
			firstAfter.Sub(killed).Round(time.Millisecond), firstAfter.Sub(restartBegin).Round(time.Millisecond))
	}
	fmt.Fprintf(b, "; %d messages stored on it before the kill were first applied after its restart", stranded)
	return b.String()
}
