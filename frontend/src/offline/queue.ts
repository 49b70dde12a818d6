// Read and star changes wait here until the server has them: sent at once
// when online, kept (in localStorage) while offline and sent on reconnect.
// Per item and per dimension only the latest change counts, so toggling an
// item five times offline sends one change.

export type ChangeKind = 'read' | 'unread' | 'star' | 'unstar';

export interface Change {
  kind: ChangeKind;
  id: string;
}

type Dimension = 'read' | 'star';

function dimension(kind: ChangeKind): Dimension {
  return kind === 'read' || kind === 'unread' ? 'read' : 'star';
}

/** Sends one batch (≤ `BATCH` ids of one kind); rejects when it did not reach the server. */
export type Send = (kind: ChangeKind, ids: string[]) => Promise<void>;

export interface Storage {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
}

/** The API takes 1–1000 ids per call. */
export const BATCH = 1000;

export class ChangeQueue {
  private pending = new Map<string, Change>();
  private flushing: Promise<boolean> | null = null;
  private listeners = new Set<(size: number) => void>();

  constructor(
    private readonly storage: Storage | null,
    private readonly key = 'trellis.pending-changes',
  ) {
    try {
      const stored = JSON.parse(storage?.getItem(key) ?? '[]') as Change[];
      for (const change of stored) this.pending.set(`${change.id}:${dimension(change.kind)}`, change);
    } catch {
      // A damaged entry is dropped; the server still has the last sent state.
    }
  }

  get size(): number {
    return this.pending.size;
  }

  changes(): Change[] {
    return [...this.pending.values()];
  }

  onChange(listener: (size: number) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  add(kind: ChangeKind, ids: readonly string[]): void {
    for (const id of ids) this.pending.set(`${id}:${dimension(kind)}`, { kind, id });
    this.save();
  }

  /**
   * Sends everything pending, batched by kind. Resolves true when the queue
   * is empty afterwards; a batch that fails stays queued (with any change
   * made meanwhile winning over it).
   */
  flush(send: Send): Promise<boolean> {
    if (this.flushing) {
      // One flush at a time; the next one picks up what arrived meanwhile.
      return this.flushing.then(() => this.flush(send));
    }
    this.flushing = this.run(send).finally(() => {
      this.flushing = null;
    });
    return this.flushing;
  }

  private async run(send: Send): Promise<boolean> {
    const snapshot = this.changes();
    const byKind = new Map<ChangeKind, string[]>();
    for (const change of snapshot) {
      const list = byKind.get(change.kind) ?? [];
      list.push(change.id);
      byKind.set(change.kind, list);
    }
    let ok = true;
    for (const [kind, ids] of byKind) {
      for (let start = 0; start < ids.length; start += BATCH) {
        const batch = ids.slice(start, start + BATCH);
        try {
          await send(kind, batch);
        } catch {
          ok = false;
          continue;
        }
        for (const id of batch) {
          const key = `${id}:${dimension(kind)}`;
          // Only if no newer change replaced it while the request ran.
          if (this.pending.get(key)?.kind === kind) this.pending.delete(key);
        }
        this.save();
      }
    }
    return ok && this.pending.size === 0;
  }

  private save(): void {
    try {
      this.storage?.setItem(this.key, JSON.stringify(this.changes()));
    } catch {
      // Storage full or refused: the changes stay in memory for this visit.
    }
    for (const listener of this.listeners) listener(this.pending.size);
  }
}
