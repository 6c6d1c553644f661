// File: bench/native.h
//
// Native C++ versions of the benchmark programs, written as the same
// recursion the dataflow graphs express, plus oracles (closed forms or loops
// that do not recurse) to check every answer, plus call counters for the
// table's "calls" column.
//
// The recursive versions live in their own translation unit and are
// noinline so the compiler cannot fold a benchmark's constant arguments into
// the call. Deep recursion (sum(10^6), primes(10^4)) needs a large C stack:
// the driver runs everything on a thread with a 4 GiB stack.
#ifndef TDF_BENCH_NATIVE_H_
#define TDF_BENCH_NATIVE_H_

#include <cstdint>

namespace tdf_bench {
namespace native {

// Recursive, as in the paper (fib(n) = n <= 1 ? 1 : fib(n-1) + fib(n-2)).
int64_t Fib(int64_t n);
int64_t Ack(int64_t m, int64_t n);
int64_t Tak(int64_t x, int64_t y, int64_t z);
// primes(n) = nth(n, 2) with nth/isprime recursing as in issue #5.
int64_t Primes(int64_t n);
// sum(n) = n == 0 ? 0 : n + sum(n-1). Recursion depth n.
int64_t Sum(int64_t n);
// s = 0; for i in [0, n): s += fib(i % 10)
int64_t CallInWhile(int64_t n);
// f(n) = n == 0 ? 0 : loopsum(n) + f(n-1), loopsum a loop summing 1..n.
int64_t WhileInFunction(int64_t n);
// i = 0; while (i < n) i = i + 1; the counter is kept opaque so the loop is
// not replaced by its closed form.
int64_t WhileLoop(int64_t n);
// x + 1 + 1 ... (length adds), each add opaque.
int64_t OpChain(int64_t x, int64_t length);

// Oracles: no deep recursion, independent of the functions above where a
// closed form or loop exists (tak has none; its oracle is the recursion).
int64_t FibOracle(int64_t n);
int64_t AckOracle(int64_t m, int64_t n);
int64_t PrimesOracle(int64_t n);
int64_t SumOracle(int64_t n);
int64_t WhileInFunctionOracle(int64_t n);

// Function invocations each program makes (every call of every function,
// the outermost included). Loops count no calls.
int64_t FibCalls(int64_t n);
int64_t AckCalls(int64_t m, int64_t n);
int64_t TakCalls(int64_t x, int64_t y, int64_t z);
int64_t PrimesCalls(int64_t n);  // nth calls + isprime calls
int64_t SumCalls(int64_t n);
int64_t CallInWhileCalls(int64_t n);
int64_t WhileInFunctionCalls(int64_t n);  // f calls + loopsum calls
// Loop iterations (body executions) of the loop programs.
int64_t CallInWhileIterations(int64_t n);
int64_t WhileInFunctionIterations(int64_t n);

}  // namespace native
}  // namespace tdf_bench

#endif  // TDF_BENCH_NATIVE_H_
