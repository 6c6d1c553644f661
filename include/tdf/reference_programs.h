/// \file
/// The reference programs of design.md §7 and the recursion issue, written
/// with GraphBuilder. Tests, examples and benchmarks share them. Every program
/// takes int64 placeholders and has one fetch, "result".
///
/// \code
///   fib(n)     = n <= 1 ? 1 : fib(n-1) + fib(n-2)               Fib()    "n"
///   ack(m,n)   = m == 0 ? n+1 : n == 0 ? ack(m-1,1) : ack(m-1, ack(m,n-1))   Ack()  "m","n"
///   tak(x,y,z) = y < x ? tak(tak(x-1,y,z), tak(y-1,z,x), tak(z-1,x,y)) : z     Tak()  "x","y","z"
///   fact(n)    = n == 1 ? 1 : n * fact(n-1)                      Fact()   "n"
///   even(n)    = n == 0 ? true : odd(n-1); odd(n) = n == 0 ? false : even(n-1)   EvenOdd() "n" (bool)
///   exp(x,n)   = n == 0 ? 1 : x * exp(x, n-1)  (x float64)       Exp()    "x","n"
///   primes(n)  = nth(n, 2), nth/isprime as in the recursion issue   Primes() "n"
///   mc91(n)    = n > 100 ? n - 10 : mc91(mc91(n + 11))           McCarthy91() "n"
///   sum(n)     = n == 0 ? 0 : n + sum(n-1)                       Sum()    "n"
///   Yaghi:  result = f(4) + f(5); f(x) = g(x+1); g(y) = y        Yaghi()  (no feeds)
///   WhileLoop: i = 0; while (i < n) i = i + 1                    WhileLoop() "n"
///   OpChain(L): x + 1 + 1 ... (L Adds)                           OpChain(L) "x"
///   CallInWhile: s = 0; i = 0; while (i < n) { s += fib(i % 10); i++ }   "n"
///   WhileInFunction: f(n) = n == 0 ? 0 : loopsum(n) + f(n-1), loopsum(n) = sum of 1..n by a while loop   "n"
///   ManyCalls(C, F): result = f_{0 % F}(n) + ... + f_{(C-1) % F}(n), C call sites of F functions
///              f_i(n) = n <= 0 ? i : n + i                       ManyCalls(C, F) "n"
///   CallChain(F): result = f_0(n); f_i(n) = n <= 0 ? 0 : f_{i+1}(n) + 1; f_{F-1}(n) = n   CallChain(F) "n"
///   LongBody(K): result = f(n); f's body is K Conds in sequence, x = n, then K times
///              x = x <= 0 ? x + n * n + 1 : x - 1               LongBody(K) "n"
///   WideBody(K): result = f(n); f(n) = g(n) + ... + g(n) (K calls), g(n) = n <= 0 ? 1 : n + 1   WideBody(K) "n"
///   MultiWayIf(D): result = f(n); f(n) = n == 0 ? 0 : n == 1 ? 10 : ... : n == D - 1 ? 10 (D - 1) : -1,
///              D Conds each nested in the else branch of the one before   MultiWayIf(D) "n"
///   (ManyCalls, CallChain, LongBody, WideBody and MultiWayIf are large programs, not deep runs:
///   Session::Create's cost, bench/create_bench.cc)
/// \endcode
#ifndef TDF_REFERENCE_PROGRAMS_H_
#define TDF_REFERENCE_PROGRAMS_H_

#include <cstdint>

#include "tdf/graph.h"

namespace tdf {
namespace reference {

/// \name The programs
/// Each returns its graph, as the file's description lists them.
/// @{

/// fib(n); placeholder n, fetch "result".
Graph Fib();
Graph Ack();
Graph Tak();
Graph Fact();
Graph EvenOdd();
Graph Exp();
Graph Primes();
Graph McCarthy91();
Graph Sum();
Graph Yaghi();
Graph WhileLoop();
Graph OpChain(int64_t length);
Graph CallInWhile();
Graph WhileInFunction();
Graph ManyCalls(int64_t calls, int64_t functions);
Graph CallChain(int64_t functions);
Graph LongBody(int64_t conds);
Graph WideBody(int64_t calls);
Graph MultiWayIf(int64_t depth);
/// @}

/// \name Native C++ versions, for checking answers
/// @{

/// fib(n) computed natively.
int64_t NativeFib(int64_t n);
int64_t NativeAck(int64_t m, int64_t n);
int64_t NativeTak(int64_t x, int64_t y, int64_t z);
int64_t NativeFact(int64_t n);
bool NativeEven(int64_t n);
double NativeExp(double x, int64_t n);
int64_t NativePrimes(int64_t n);
int64_t NativeMcCarthy91(int64_t n);
int64_t NativeSum(int64_t n);
int64_t NativeCallInWhile(int64_t n);
int64_t NativeWhileInFunction(int64_t n);
int64_t NativeManyCalls(int64_t calls, int64_t functions, int64_t n);
int64_t NativeCallChain(int64_t functions, int64_t n);
int64_t NativeLongBody(int64_t conds, int64_t n);
int64_t NativeWideBody(int64_t calls, int64_t n);
int64_t NativeMultiWayIf(int64_t depth, int64_t n);
/// @}

}  // namespace reference
}  // namespace tdf

#endif  // TDF_REFERENCE_PROGRAMS_H_
