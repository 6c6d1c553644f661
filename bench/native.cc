// File: bench/native.cc
#include "native.h"

#include <cstdlib>

#include "benchmark/benchmark.h"

namespace tdf_bench {
namespace native {
namespace {

__attribute__((noinline)) bool IsPrime(int64_t n, int64_t d) {
  return d * d > n ? true : n % d == 0 ? false : IsPrime(n, d + 1);
}

__attribute__((noinline)) int64_t Nth(int64_t k, int64_t c) {
  return IsPrime(c, 2) ? (k == 1 ? c : Nth(k - 1, c + 1)) : Nth(k, c + 1);
}

__attribute__((noinline)) int64_t LoopSum(int64_t n) {
  int64_t i = 1, s = 0;
  while (i <= n) {
    s += i;
    ++i;
    benchmark::DoNotOptimize(i);
  }
  return s;
}

void AckCount(int64_t m, int64_t n, int64_t* calls, int64_t* result) {
  // Same recursion as Ack, counting; the outer call of ack(m-1, ack(m, n-1))
  // is iterated instead of recursed so the C stack grows only with the inner
  // calls (the count is unchanged: one per invocation).
  for (;;) {
    ++*calls;
    if (m == 0) {
      *result = n + 1;
      return;
    }
    if (n == 0) {
      m = m - 1;
      n = 1;
      continue;
    }
    int64_t inner;
    AckCount(m, n - 1, calls, &inner);
    m = m - 1;
    n = inner;
  }
}

int64_t TakCount(int64_t x, int64_t y, int64_t z, int64_t* calls) {
  ++*calls;
  if (!(y < x)) return z;
  int64_t a = TakCount(x - 1, y, z, calls);
  int64_t b = TakCount(y - 1, z, x, calls);
  int64_t c = TakCount(z - 1, x, y, calls);
  return TakCount(a, b, c, calls);
}

}  // namespace

__attribute__((noinline)) int64_t Fib(int64_t n) { return n <= 1 ? 1 : Fib(n - 1) + Fib(n - 2); }

__attribute__((noinline)) int64_t Ack(int64_t m, int64_t n) {
  return m == 0 ? n + 1 : n == 0 ? Ack(m - 1, 1) : Ack(m - 1, Ack(m, n - 1));
}

__attribute__((noinline)) int64_t Tak(int64_t x, int64_t y, int64_t z) {
  return y < x ? Tak(Tak(x - 1, y, z), Tak(y - 1, z, x), Tak(z - 1, x, y)) : z;
}

int64_t Primes(int64_t n) { return Nth(n, 2); }

__attribute__((noinline)) int64_t Sum(int64_t n) { return n == 0 ? 0 : n + Sum(n - 1); }

int64_t CallInWhile(int64_t n) {
  int64_t s = 0;
  for (int64_t i = 0; i < n; ++i) s += Fib(i % 10);
  return s;
}

__attribute__((noinline)) int64_t WhileInFunctionRec(int64_t n) {
  return n == 0 ? 0 : LoopSum(n) + WhileInFunctionRec(n - 1);
}
int64_t WhileInFunction(int64_t n) { return WhileInFunctionRec(n); }

int64_t WhileLoop(int64_t n) {
  int64_t i = 0;
  while (i < n) {
    i = i + 1;
    benchmark::DoNotOptimize(i);
  }
  return i;
}

int64_t OpChain(int64_t x, int64_t length) {
  for (int64_t i = 0; i < length; ++i) {
    x = x + 1;
    benchmark::DoNotOptimize(x);
  }
  return x;
}

int64_t FibOracle(int64_t n) {
  int64_t a = 1, b = 1;  // fib(0), fib(1)
  for (int64_t i = 2; i <= n; ++i) {
    int64_t c = a + b;
    a = b;
    b = c;
  }
  return n <= 0 ? 1 : b;
}

int64_t AckOracle(int64_t m, int64_t n) {
  switch (m) {
    case 0: return n + 1;
    case 1: return n + 2;
    case 2: return 2 * n + 3;
    case 3: return (int64_t{1} << (n + 3)) - 3;
    default: {
      int64_t calls = 0, result = 0;
      AckCount(m, n, &calls, &result);
      return result;
    }
  }
}

int64_t PrimesOracle(int64_t n) {
  int64_t k = n;
  for (int64_t c = 2;; ++c) {
    bool prime = true;
    for (int64_t d = 2; d * d <= c; ++d) {
      if (c % d == 0) {
        prime = false;
        break;
      }
    }
    if (prime && --k == 0) return c;
  }
}

int64_t SumOracle(int64_t n) { return n * (n + 1) / 2; }

int64_t WhileInFunctionOracle(int64_t n) {
  // sum_{k=1..n} k(k+1)/2 = n(n+1)(n+2)/6
  return n * (n + 1) * (n + 2) / 6;
}

int64_t FibCalls(int64_t n) { return 2 * FibOracle(n) - 1; }

int64_t AckCalls(int64_t m, int64_t n) {
  int64_t calls = 0, result = 0;
  AckCount(m, n, &calls, &result);
  return calls;
}

int64_t TakCalls(int64_t x, int64_t y, int64_t z) {
  int64_t calls = 0;
  TakCount(x, y, z, &calls);
  return calls;
}

int64_t PrimesCalls(int64_t n) {
  // nth(k, c) is called once per candidate c = 2..p(n); each calls
  // isprime(c, 2), which recurses once per divisor tried.
  int64_t calls = 0, k = n;
  for (int64_t c = 2;; ++c) {
    ++calls;  // nth(k, c)
    int64_t d = 2;
    bool prime;
    for (;;) {
      ++calls;  // isprime(c, d)
      if (d * d > c) {
        prime = true;
        break;
      }
      if (c % d == 0) {
        prime = false;
        break;
      }
      ++d;
    }
    if (prime && --k == 0) return calls;
  }
}

int64_t SumCalls(int64_t n) { return n + 1; }

int64_t CallInWhileCalls(int64_t n) {
  int64_t calls = 0;
  for (int64_t i = 0; i < n; ++i) calls += FibCalls(i % 10);
  return calls;
}

int64_t WhileInFunctionCalls(int64_t n) { return (n + 1) + n; }

int64_t CallInWhileIterations(int64_t n) { return n; }

int64_t WhileInFunctionIterations(int64_t n) { return n * (n + 1) / 2; }

}  // namespace native
}  // namespace tdf_bench
