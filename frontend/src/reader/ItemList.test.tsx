// The item list renders rows that read the selection themselves: moving it
// (j/k) re-renders the two rows whose selection flipped, not the list, and a
// page appended to the list re-renders no row already shown.
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';
import { act, cleanup, render } from '@testing-library/preact';
import { createRef } from 'preact';

const rendered: string[] = [];
vi.mock('./when', () => ({
  when: (iso: string) => {
    rendered.push(iso);
    return iso;
  },
}));

const { ItemList } = await import('./ItemList');
const { items, listState, selectedId } = await import('./store');

function item(n: number) {
  return {
    id: String(n),
    feedId: '1',
    title: `Story ${n}`,
    link: null,
    pubDate: `2026-12-04T00:00:${String(n % 60).padStart(2, '0')}Z`,
    createdAt: '2026-12-04T00:00:00Z',
    unread: true,
    starred: false,
  } as unknown as (typeof items.value)[number];
}

/** Renders the list and lets the virtualizer measure its viewport (one more render). */
async function show() {
  const listRef = createRef<HTMLDivElement>();
  const view = render(<ItemList listRef={listRef} onOpen={() => undefined} current={{ kind: 'all' }} which="all" />);
  await act(async () => undefined);
  return { view, list: () => view.container.querySelector('[role=listbox]')! };
}

// happy-dom lays nothing out: every element is 600 × 800 px here.
beforeEach(() => {
  vi.spyOn(HTMLElement.prototype, 'clientHeight', 'get').mockReturnValue(800);
  vi.spyOn(HTMLElement.prototype, 'clientWidth', 'get').mockReturnValue(600);
  items.value = Array.from({ length: 30 }, (_, n) => item(n));
  listState.value = 'ready';
  selectedId.value = null;
  rendered.length = 0;
});

afterEach(() => {
  cleanup();
  vi.restoreAllMocks();
});

describe('ItemList', () => {
  test('moving the selection re-renders only the rows it leaves and reaches', async () => {
    const { view, list } = await show();
    const shown = view.container.querySelectorAll('[role=option]').length;
    expect(shown).toBeGreaterThan(2);

    rendered.length = 0;
    await act(() => {
      selectedId.value = '0';
    });
    expect(view.container.querySelector('#item-0')!.getAttribute('aria-selected')).toBe('true');
    expect(list().getAttribute('aria-activedescendant')).toBe('item-0');
    expect(rendered).toEqual([item(0).pubDate]);

    rendered.length = 0;
    await act(() => {
      selectedId.value = '1';
    });
    expect(view.container.querySelector('#item-0')!.getAttribute('aria-selected')).toBe('false');
    expect(view.container.querySelector('#item-1')!.getAttribute('aria-selected')).toBe('true');
    expect(list().getAttribute('aria-activedescendant')).toBe('item-1');
    expect(rendered.sort()).toEqual([item(0).pubDate, item(1).pubDate].sort());
  });

  test('a page appended to the list re-renders no row already shown', async () => {
    const { view } = await show();
    const first = view.container.querySelector('#item-0');
    expect(first).not.toBeNull();
    rendered.length = 0;
    await act(() => {
      items.value = [...items.value, ...Array.from({ length: 30 }, (_, n) => item(30 + n))];
    });
    expect(rendered).toEqual([]);
    expect(view.container.querySelector('#item-0')).toBe(first);
  });
});
