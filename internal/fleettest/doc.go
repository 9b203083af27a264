// Package fleettest runs ID generators as a fleet of separate OS
// processes, so that tests can kill, stop and restart them and count
// exactly which IDs they issued: leased generators ([Fleet]) and segment
// allocators ([SegmentProcesses]).
//
// A test package's binary is its own child (internal/racechild): its
// TestMain passes [Roles] to racechild.Main. Every ID a child issues is
// written to a file; an ID it issued but did not write was never used by
// anyone, so the files are what must hold no duplicates ([Duplicates]).
package fleettest
