/** Throughput figures shared by produce, consume and perf. MB is 2^20 bytes. */
export interface Rate {
  readonly msgsPerSec: number;
  readonly mbPerSec: number;
}

/** Messages and MB (2^20 bytes) per second; 0 when no time passed. */
export function rate(messages: number, bytes: number, seconds: number): Rate {
  if (!(seconds > 0)) return { msgsPerSec: 0, mbPerSec: 0 };
  return { msgsPerSec: messages / seconds, mbPerSec: bytes / (1024 * 1024) / seconds };
}
