/* Cache-line round trip between two threads, in nanoseconds.
 *
 *   gcc -O2 -pthread bench/pingpong.c -o /tmp/pingpong && /tmp/pingpong
 *
 * Two threads pass one 64-byte line back and forth (each waits for the
 * other's write, then writes back), ROUNDS times, 5 times over; prints the
 * median round trip.  Threads sharing a timer or a lock move such lines on
 * every operation, so their speed follows this figure: on the project's
 * 2-vCPU VM it reads 66-91 ns normally and about 355 ns when the host
 * places the two vCPUs far apart (bench/README.md, docs/freethreading.md).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define ROUNDS 200000
#define TRIES 5

static _Alignas(64) _Atomic long ball;

static void *pong(void *arg) {
    (void)arg;
    for (long i = 0; i < (long)ROUNDS * TRIES; i++) {
        while (atomic_load_explicit(&ball, memory_order_acquire) != 2 * i + 1)
            ;
        atomic_store_explicit(&ball, 2 * i + 2, memory_order_release);
    }
    return NULL;
}

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(void) {
    pthread_t t;
    double rt[TRIES];
    long n = 0;
    if (pthread_create(&t, NULL, pong, NULL) != 0) {
        perror("pthread_create");
        return 1;
    }
    for (int k = 0; k < TRIES; k++) {
        double start = now_ns();
        for (long i = 0; i < ROUNDS; i++, n++) {
            atomic_store_explicit(&ball, 2 * n + 1, memory_order_release);
            while (atomic_load_explicit(&ball, memory_order_acquire) != 2 * n + 2)
                ;
        }
        rt[k] = (now_ns() - start) / ROUNDS;
    }
    pthread_join(t, NULL);
    qsort(rt, TRIES, sizeof rt[0], cmp);
    printf("cache-line round trip: %.0f ns (median of %d x %d)\n", rt[TRIES / 2], TRIES,
           ROUNDS);
    return 0;
}
