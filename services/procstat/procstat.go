// Package procstat reads a process's /proc/PID/stat (proc(5)): its state,
// parent, CPU time and start time. The node uses it to tell a process it
// started from a later one with the same pid and to find zombies; the
// benchmarks use it for CPU per process.
package procstat

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// ErrFormat means a stat line is not in proc(5)'s format.
var ErrFormat = errors.New("procstat: unexpected /proc/PID/stat format")

// Stat is what cairn uses of /proc/PID/stat.
type Stat struct {
	// State is field 3: 'R' running, 'S' sleeping, 'Z' zombie, ...
	State byte
	// PPID is field 4.
	PPID int
	// UTime and STime are fields 14 and 15, in clock ticks; CUTime and
	// CSTime (16 and 17) are those of the children it has reaped.
	UTime, STime, CUTime, CSTime uint64
	// StartTime is field 22, the start after boot in clock ticks: with
	// the pid it names one process.
	StartTime uint64
}

// userHZ is the clock tick of /proc (USER_HZ), 100 on every Linux
// architecture Go supports.
const userHZ = 100

// Read reads /proc/pid/stat.
func Read(pid int) (Stat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Stat{}, err
	}
	st, err := Parse(string(b))
	if err != nil {
		return Stat{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return st, nil
}

// Parse parses one stat line. The command (field 2) is in parentheses and
// may hold spaces and parentheses itself, so the fields are counted from
// its last ')'.
func Parse(line string) (Stat, error) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return Stat{}, ErrFormat
	}
	f := strings.Fields(line[i+1:]) // from field 3 on
	if len(f) < 20 || len(f[0]) != 1 {
		return Stat{}, ErrFormat
	}
	st := Stat{State: f[0][0]}
	var errs [6]error
	st.PPID, errs[0] = strconv.Atoi(f[1])
	st.UTime, errs[1] = strconv.ParseUint(f[11], 10, 64)
	st.STime, errs[2] = strconv.ParseUint(f[12], 10, 64)
	// cutime and cstime are signed in proc(5) (long) but never below 0.
	st.CUTime, errs[3] = strconv.ParseUint(f[13], 10, 64)
	st.CSTime, errs[4] = strconv.ParseUint(f[14], 10, 64)
	st.StartTime, errs[5] = strconv.ParseUint(f[19], 10, 64)
	if err := errors.Join(errs[:]...); err != nil {
		return Stat{}, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	return st, nil
}

// CPU is the process's user and system time.
func (s Stat) CPU() time.Duration {
	return time.Duration(s.UTime+s.STime) * time.Second / userHZ
}

// TreeCPU is CPU plus what its reaped children used.
func (s Stat) TreeCPU() time.Duration {
	return time.Duration(s.UTime+s.STime+s.CUTime+s.CSTime) * time.Second / userHZ
}

// Zombie reports whether the process has exited and waits to be reaped.
func (s Stat) Zombie() bool { return s.State == 'Z' }

// Alive reports whether pid runs: it exists and is no zombie.
func Alive(pid int) bool {
	st, err := Read(pid)
	return err == nil && !st.Zombie()
}
