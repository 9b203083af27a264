// Package fleettest runs leased ID generators as a fleet of separate OS
// processes, so that tests can kill, stop and restart them and count
// exactly which IDs they issued.
//
// A test package's binary is its own child: an init function calls
// [Child] when [IsChild] says this run is one, and exits with its result.
// The parent starts children with [Fleet.Start]. Every ID a child issues
// is written to a file; an ID it issued but did not write was never used by
// anyone, so the files are what must hold no duplicates ([Duplicates]).
package fleettest
