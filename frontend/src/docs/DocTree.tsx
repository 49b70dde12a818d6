// The mirrored documents of one platform as a WAI-ARIA tree: one tab
// stop (roving tabindex), Up/Down between visible rows, Right opens a
// folder (its entries load when first opened) or moves to its first
// entry, Left closes or moves to the parent, Home/End, Enter opens the
// document, a letter moves to the next title starting with it. The walk
// and the keys are the live tree's (`ui/treenav.ts`).
import { useSignal } from '@preact/signals';
import { useEffect, useLayoutEffect, useMemo, useRef } from 'preact/hooks';
import { useLocation } from 'preact-iso';
import { query } from '../api/client';
import { DocsTreeDocument, type DocEntryFieldsFragment } from '../gql/graphql';
import { me } from '../state/session';
import { Empty, Failed, Loading } from '../ui/states';
import { flattenTree, treeKey, type FlatRow } from '../ui/treenav';
import { PLATFORM_NAME, docHref, type Platform } from './paths';

type Entry = DocEntryFieldsFragment;

/** An entry that is a document of its own (a page, even one with sub-pages), not only a folder. */
const opensDoc = (entry: Entry) => !entry.folder || (entry.id !== null && entry.id !== undefined);

export function DocTree({ platform, label }: { platform: Platform; label: string }) {
  const { route } = useLocation();
  const roots = useSignal<Entry[] | null>(null);
  /** Loaded entries per folder path. */
  const kids = useSignal<Record<string, Entry[]>>({});
  const open = useSignal<ReadonlySet<string>>(new Set());
  const loading = useSignal<string | null>(null);
  const error = useSignal<{ path: string | null; error: unknown } | null>(null);
  const focused = useSignal<string | null>(null);
  const tree = useRef<HTMLUListElement>(null);
  /** Set by a key: the focused row takes the DOM focus after the render. */
  const moveFocus = useRef(false);

  const loadRoots = () =>
    query(DocsTreeDocument, { platform, path: null })
      .then((data) => {
        roots.value = data.docTree;
        error.value = null;
      })
      .catch((caught) => (error.value = { path: null, error: caught }));
  useEffect(() => void loadRoots(), [platform]);

  async function expand(path: string) {
    if (!kids.value[path]) {
      loading.value = path;
      try {
        const data = await query(DocsTreeDocument, { platform, path });
        kids.value = { ...kids.value, [path]: data.docTree };
        error.value = null;
      } catch (caught) {
        error.value = { path, error: caught };
        return;
      } finally {
        loading.value = null;
      }
    }
    open.value = new Set([...open.value, path]);
  }

  function collapse(path: string) {
    const next = new Set(open.value);
    next.delete(path);
    open.value = next;
    // The tab stop never stays on a row that is hidden now.
    if (focused.value?.startsWith(`${path}/`)) focused.value = path;
  }

  const toggle = (row: FlatRow<Entry>) => (row.expanded ? collapse(row.id) : void expand(row.id));

  const rows = useMemo(
    () =>
      flattenTree(roots.value ?? [], {
        id: (entry) => entry.path,
        children: (entry) => kids.value[entry.path],
        expandable: (entry) => entry.folder,
        expanded: (entry) => open.value.has(entry.path),
      }),
    [roots.value, kids.value, open.value],
  );
  const found = rows.findIndex((row) => row.id === focused.value);
  const current = found < 0 ? 0 : found;

  useLayoutEffect(() => {
    if (!moveFocus.current) return;
    moveFocus.current = false;
    tree.current?.querySelectorAll<HTMLElement>('[role="treeitem"]')[current]?.focus();
  });

  function onKey(event: KeyboardEvent) {
    const action = treeKey(rows, current, event, (row) => (row as FlatRow<Entry>).item.title);
    if (!action) return;
    event.preventDefault();
    const row = rows.find((each) => each.id === action.id);
    if (action.type === 'focus') {
      focused.value = action.id;
      moveFocus.current = true;
    } else if (action.type === 'expand') void expand(action.id);
    else if (action.type === 'collapse') collapse(action.id);
    else if (row && event.key === 'Enter' && opensDoc(row.item)) route(docHref(row.id));
    else if (row?.expandable) toggle(row);
  }

  const failed = error.value;
  if (failed && failed.path === null) return <Failed error={failed.error} retry={loadRoots} />;
  if (!roots.value) return <Loading label={`Loading ${label}…`} />;
  if (roots.value.length === 0) {
    return (
      <Empty title={`The ${PLATFORM_NAME[platform]} mirror is empty`}>
        Nothing is mirrored from {PLATFORM_NAME[platform]} yet: the mirror is not configured, or no sync has run.
        {me.value?.role === 'ADMIN' ? ' Set its credentials, then press “Sync now”.' : ' An admin sets it up.'}
      </Empty>
    );
  }
  return (
    <>
      <ul class="doc-tree" role="tree" aria-label={label} ref={tree} onKeyDown={onKey}>
        {rows.map((row, index) => (
          <li
            key={row.id}
            role="treeitem"
            tabIndex={index === current ? 0 : -1}
            aria-level={row.level + 1}
            aria-posinset={row.position}
            aria-setsize={row.siblings}
            aria-expanded={row.expandable ? row.expanded : undefined}
            aria-busy={loading.value === row.id || undefined}
            class="doc-row"
            style={{ paddingLeft: `${row.level * 22}px` }}
            onFocus={() => (focused.value = row.id)}
          >
            <span class="twisty" aria-hidden="true" onClick={() => row.expandable && toggle(row)}>
              {row.expandable ? (row.expanded ? '▾' : '▸') : ''}
            </span>
            {opensDoc(row.item) ? (
              <a href={docHref(row.id)} tabIndex={-1}>
                {row.item.title}
              </a>
            ) : (
              <span class="folder-name" onClick={() => toggle(row)}>
                {row.item.title}
              </span>
            )}
            {row.item.kind && <span class="badge">{row.item.kind}</span>}
            {row.item.status === 'pending_assets' && <span class="badge warn">assets pending</span>}
          </li>
        ))}
      </ul>
      {failed && failed.path !== null && <Failed error={failed.error} retry={() => void expand(failed.path!)} />}
    </>
  );
}
