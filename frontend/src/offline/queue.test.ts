import { describe, expect, test } from 'vitest';
import { BATCH, ChangeQueue, type ChangeKind } from './queue';

class MemoryStorage {
  data = new Map<string, string>();
  getItem(key: string) {
    return this.data.get(key) ?? null;
  }
  setItem(key: string, value: string) {
    this.data.set(key, value);
  }
}

function recorder(fail: (kind: ChangeKind, ids: string[]) => boolean = () => false) {
  const calls: [ChangeKind, string[]][] = [];
  const send = async (kind: ChangeKind, ids: string[]) => {
    calls.push([kind, [...ids]]);
    if (fail(kind, ids)) throw new Error('offline');
  };
  return { calls, send };
}

describe('offline change queue', () => {
  test('only the latest change per item and dimension is sent', async () => {
    const queue = new ChangeQueue(null);
    queue.add('read', ['1', '2']);
    queue.add('unread', ['1']);
    queue.add('star', ['1']);
    queue.add('unstar', ['1']);
    queue.add('star', ['1']);
    const { calls, send } = recorder();
    expect(await queue.flush(send)).toBe(true);
    const sorted = calls.map(([kind, ids]) => `${kind}:${ids.sort().join(',')}`).sort();
    expect(sorted).toEqual(['read:2', 'star:1', 'unread:1']);
    expect(queue.size).toBe(0);
  });

  test('a failed send keeps its changes for the next flush, across reloads', async () => {
    const storage = new MemoryStorage();
    const queue = new ChangeQueue(storage);
    queue.add('read', ['1', '2']);
    queue.add('star', ['3']);
    const offline = recorder((kind) => kind === 'read');
    expect(await queue.flush(offline.send)).toBe(false);
    expect(queue.changes()).toEqual([
      { kind: 'read', id: '1' },
      { kind: 'read', id: '2' },
    ]);
    // A reload reads what is still pending.
    const reloaded = new ChangeQueue(storage);
    expect(reloaded.size).toBe(2);
    const online = recorder();
    expect(await reloaded.flush(online.send)).toBe(true);
    expect(online.calls).toEqual([['read', ['1', '2']]]);
  });

  test('a change made while its older version is being sent is not lost', async () => {
    const queue = new ChangeQueue(null);
    queue.add('read', ['1']);
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const sent: string[] = [];
    const flushing = queue.flush(async (kind, ids) => {
      sent.push(`${kind}:${ids.join(',')}`);
      if (kind === 'read') await gate;
    });
    queue.add('unread', ['1']);
    release();
    await flushing;
    expect(queue.changes()).toEqual([{ kind: 'unread', id: '1' }]);
    expect(await queue.flush(async (kind, ids) => void sent.push(`${kind}:${ids.join(',')}`))).toBe(true);
    expect(sent).toEqual(['read:1', 'unread:1']);
  });

  test('batches hold at most the API’s limit', async () => {
    const queue = new ChangeQueue(null);
    const ids = Array.from({ length: BATCH * 2 + 5 }, (_, index) => String(index));
    queue.add('read', ids);
    const { calls, send } = recorder();
    await queue.flush(send);
    expect(calls.map(([, batch]) => batch.length)).toEqual([BATCH, BATCH, 5]);
  });

  test('a damaged stored queue is dropped, not thrown', () => {
    const storage = new MemoryStorage();
    storage.setItem('trellis.pending-changes', '{not json');
    expect(new ChangeQueue(storage).size).toBe(0);
  });
});
