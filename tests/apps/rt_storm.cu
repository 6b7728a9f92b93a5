// rt_storm: a multi-stream, multi-thread launch storm (runtime API): T host
// threads (default 8), each with S streams of its own (default 2), launch
// empty kernels round-robin over their streams, all starting together. One
// line per figure: "launches: N" and "us per launch: X" (wall time of the
// storm from the common start to the last thread's cudaStreamSynchronize,
// divided by all launches), the benchmark's per-launch figure under
// recording contention (issue 10: <= 1.10x recorded/native).
// usage: rt_storm [launches_per_thread=20000] [threads=8] [streams_per_thread=2]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <pthread.h>
#include <vector>
#include <cuda_runtime.h>

__global__ void storm_kernel() {}

struct arg {
  long n;
  int streams;
  pthread_barrier_t *start;
  int fail;
};

static void *run(void *p) {
  arg *a = (arg *)p;
  std::vector<cudaStream_t> s(a->streams);
  for (auto &x : s)
    if (cudaStreamCreateWithFlags(&x, cudaStreamNonBlocking) != cudaSuccess) a->fail = 1;
  storm_kernel<<<1, 1, 0, s[0]>>>(); // warm-up on this thread
  if (cudaStreamSynchronize(s[0]) != cudaSuccess) a->fail = 1;
  pthread_barrier_wait(a->start);
  for (long i = 0; i < a->n; i++) storm_kernel<<<1, 1, 0, s[i % a->streams]>>>();
  for (auto &x : s)
    if (cudaStreamSynchronize(x) != cudaSuccess) a->fail = 1;
  pthread_barrier_wait(a->start);
  for (auto &x : s) cudaStreamDestroy(x);
  return nullptr;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 20000;
  int t = argc > 2 ? atoi(argv[2]) : 8;
  int ns = argc > 3 ? atoi(argv[3]) : 2;
  if (n <= 0 || t <= 0 || ns <= 0) {
    fprintf(stderr, "usage: %s [launches_per_thread] [threads] [streams_per_thread]\n", argv[0]);
    return 2;
  }
  if (cudaFree(nullptr) != cudaSuccess) { fprintf(stderr, "no CUDA device\n"); return 77; }
  pthread_barrier_t start;
  pthread_barrier_init(&start, nullptr, (unsigned)t + 1);
  std::vector<arg> a(t);
  std::vector<pthread_t> th(t);
  for (int i = 0; i < t; i++) {
    a[i] = {n, ns, &start, 0};
    pthread_create(&th[i], nullptr, run, &a[i]);
  }
  pthread_barrier_wait(&start); // every thread warmed up
  auto t0 = std::chrono::steady_clock::now();
  pthread_barrier_wait(&start); // every thread launched and synchronised
  auto t1 = std::chrono::steady_clock::now();
  int fail = 0;
  for (int i = 0; i < t; i++) {
    pthread_join(th[i], nullptr);
    fail |= a[i].fail;
  }
  if (fail || cudaGetLastError() != cudaSuccess) { fprintf(stderr, "storm failed\n"); return 1; }
  double us = std::chrono::duration<double, std::micro>(t1 - t0).count();
  printf("threads: %d, streams per thread: %d\n", t, ns);
  printf("launches: %ld\n", n * t);
  printf("us per launch: %.3f\n", us / (double)(n * t));
  return 0;
}
