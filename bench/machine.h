// What a benchmark table should say about the machine it was measured on.
#ifndef TDF_BENCH_MACHINE_H_
#define TDF_BENCH_MACHINE_H_

#include <string>

namespace tdf_bench {

// Round trip of one cache line between two threads, in ns (the median of
// three short bursts of ping-pong on an atomic; the threads are pinned to
// the first two CPUs the process may use). NaN when it may use fewer than
// two, or when a burst overruns its 200 ms budget. On this project's 2-vCPU
// VM it moves between about 80 and 420 ns over minutes as the host places
// the vCPUs, and multi-worker figures that
// communicate between workers (TreeRNN at 2 workers: ~3400 vs ~1800 trees/s)
// move with it; a table records it so that its runs can be compared.
double CoreToCoreRoundTripNs();

// "2 hardware threads; core-to-core round trip 83 ns (start) / 415 ns (end)".
std::string MachineLine(double round_trip_start_ns, double round_trip_end_ns);

}  // namespace tdf_bench

#endif  // TDF_BENCH_MACHINE_H_
