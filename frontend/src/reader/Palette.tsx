// ⌘K: search articles and feeds, or jump anywhere, from the keyboard.
import { useSignal } from '@preact/signals';
import { useEffect, useRef } from 'preact/hooks';
import { query } from '../api/client';
import { SearchDocument, type SearchQuery } from '../gql/graphql';
import { feeds } from './store';

interface Entry {
  key: string;
  title: string;
  sub?: string;
  run: () => void;
}

const PAGES: [string, string][] = [
  ['Reader: unread', '/read'],
  ['Reader: starred', '/read/starred'],
  ['Live dashboard', '/live'],
  ['Resources', '/live/resources'],
  ['Tasks', '/live/tasks'],
  ['Docs', '/docs'],
  ['Gateway', '/gateway'],
  ['Settings', '/settings'],
];

export function Palette(props: {
  onClose: () => void;
  onOpenItem: (feedId: string, id: string) => void;
  onGo: (url: string) => void;
  onSearch: (text: string) => void;
}) {
  const text = useSignal('');
  const results = useSignal<SearchQuery['search'] | null>(null);
  const active = useSignal(0);
  const input = useRef<HTMLInputElement>(null);

  useEffect(() => input.current?.focus(), []);

  useEffect(() => {
    const value = text.value.trim();
    if (value.length < 2) {
      results.value = null;
      return;
    }
    let live = true;
    const timer = setTimeout(() => {
      query(SearchDocument, { query: value })
        .then((data) => {
          if (live) results.value = data.search;
        })
        .catch(() => {
          if (live) results.value = { feeds: [], items: [] };
        });
    }, 120);
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [text.value]);

  const value = text.value.trim();
  const lower = value.toLowerCase();
  const entries: Entry[] = [];
  const done = (run: () => void) => () => {
    props.onClose();
    run();
  };
  if (value) entries.push({ key: 'search', title: `Search articles for “${value}”`, run: done(() => props.onSearch(value)) });
  for (const [title, url] of PAGES) {
    if (!lower || title.toLowerCase().includes(lower)) entries.push({ key: url, title, sub: 'Go to', run: done(() => props.onGo(url)) });
  }
  for (const feed of feeds.value.values()) {
    if (lower && feed.name.toLowerCase().includes(lower)) {
      entries.push({ key: `feed-${feed.id}`, title: feed.name, sub: 'Feed', run: done(() => props.onGo(`/read/feed/${feed.id}`)) });
    }
  }
  for (const item of results.value?.items ?? []) {
    entries.push({
      key: `item-${item.id}`,
      title: item.title || '(untitled)',
      sub: feeds.value.get(item.feedId)?.name ?? 'Article',
      run: done(() => props.onOpenItem(item.feedId, item.id)),
    });
  }
  const current = Math.min(active.value, Math.max(0, entries.length - 1));

  return (
    <div class="palette" onClick={(event) => event.target === event.currentTarget && props.onClose()}>
      <div class="palette-box" role="dialog" aria-modal="true" aria-label="Command palette">
        <input
          ref={input}
          class="input"
          role="combobox"
          aria-expanded="true"
          aria-controls="palette-results"
          aria-activedescendant={entries[current] ? `palette-${current}` : undefined}
          aria-label="Search or jump to"
          placeholder="Search articles, feeds, pages…"
          value={text.value}
          onInput={(event) => {
            text.value = (event.target as HTMLInputElement).value;
            active.value = 0;
          }}
          onKeyDown={(event) => {
            if (event.key === 'ArrowDown') {
              event.preventDefault();
              active.value = Math.min(entries.length - 1, current + 1);
            } else if (event.key === 'ArrowUp') {
              event.preventDefault();
              active.value = Math.max(0, current - 1);
            } else if (event.key === 'Enter') {
              event.preventDefault();
              entries[current]?.run();
            } else if (event.key === 'Escape') {
              event.preventDefault();
              props.onClose();
            }
          }}
        />
        <ul class="palette-results" id="palette-results" role="listbox" aria-label="Results">
          {entries.map((entry, index) => (
            <li
              key={entry.key}
              id={`palette-${index}`}
              role="option"
              aria-selected={index === current}
              onClick={entry.run}
              onMouseMove={() => (active.value = index)}
            >
              <span>{entry.title}</span>
              {entry.sub && <span class="sub">{entry.sub}</span>}
            </li>
          ))}
        </ul>
        <div class="palette-hint">
          <kbd>↑</kbd> <kbd>↓</kbd> to move, <kbd>Enter</kbd> to open, <kbd>Esc</kbd> to close
        </div>
      </div>
    </div>
  );
}
