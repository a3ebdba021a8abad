// Shared-memory transaction barriers (mbarrier, sm_90): the producer/consumer
// handshake of the warp-specialized prefill ring (prefill_sm90_ws.cuh). A
// barrier completes a phase when its expected arrivals have arrived and, for
// TMA, the bytes it was told to expect have landed; waiters name the phase
// they wait for by its parity (0, 1, 0, ...), so a ring of barriers needs no
// reset: use n of stage n % S waits for parity (n / S) & 1.
#pragma once
#include "platform.cuh"

namespace attnjit {

struct MBarrier {
  uint32_t addr;  // shared-window address, 8-byte aligned

  // One thread, before any use; then fence_mbarrier_init() and a CTA barrier.
  ATTNJIT_DEVICE void init(uint32_t arrivals) const {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(addr), "r"(arrivals) : "memory");
  }
  ATTNJIT_DEVICE void arrive() const {
    asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(addr) : "memory");
  }
  // This thread's arrival, and `bytes` more to land before the phase completes (TMA).
  ATTNJIT_DEVICE void arrive_expect_tx(uint32_t bytes) const {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(addr), "r"(bytes)
                 : "memory");
  }
  // Until the phase of this parity has completed (a fresh barrier's phase
  // "before" 0, parity 1, counts as completed: a producer's first pass over
  // the ring's empty barriers does not wait).
  ATTNJIT_DEVICE void wait(uint32_t parity) const {
    uint32_t done;
    do {
      asm volatile(
          "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
          : "=r"(done)
          : "r"(addr), "r"(parity)
          : "memory");
    } while (!done);
  }
  // The same for a whole warp, which leaves converged (the .aligned
  // instructions after it, wgmma and named barriers, need every lane).
  ATTNJIT_DEVICE void wait_warp(uint32_t parity) const {
    wait(parity);
    __syncwarp();
  }
};

// Makes barrier initialization visible to the async proxy (TMA's complete_tx)
// and the other threads, before the CTA barrier that publishes it.
ATTNJIT_DEVICE void fence_mbarrier_init() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }

}  // namespace attnjit
