// Adding a feed (from a site's address, with discovery) and editing one:
// name, address, group, refresh interval, suspension, deletion, and its
// health (last error, failures, next check).
import { useSignal } from '@preact/signals';
import { useEffect } from 'preact/hooks';
import { mutate, query } from '../api/client';
import {
  CreateFeedDocument,
  CreateGroupDocument,
  DeleteFeedDocument,
  DiscoverDocument,
  RefreshFeedDocument,
  RefreshOptionsDocument,
  UpdateFeedDocument,
  type DiscoverQuery,
} from '../gql/graphql';
import { Modal } from '../ui/Modal';
import { errorText } from '../ui/states';
import { toast } from '../ui/toast';
import { feeds, groups, loadFeeds, putFeed } from './store';

type Mode = { mode: 'add' } | { mode: 'edit'; id: string };

export function interval(seconds: number): string {
  if (seconds % 86_400 === 0) return `${seconds / 86_400} day${seconds === 86_400 ? '' : 's'}`;
  if (seconds % 3_600 === 0) return `${seconds / 3_600} hour${seconds === 3_600 ? '' : 's'}`;
  return `${Math.round(seconds / 60)} minutes`;
}

function GroupSelect({ value, onChange }: { value: string; onChange: (id: string) => void }) {
  return (
    <select id="feed-group" class="input" value={value} onChange={(event) => onChange((event.target as HTMLSelectElement).value)}>
      {groups.value.map((group) => (
        <option key={group.id} value={group.id}>
          {group.name}
        </option>
      ))}
      <option value="new">New group…</option>
    </select>
  );
}

async function resolveGroup(choice: string, newName: string): Promise<string | undefined> {
  if (choice !== 'new') return choice || undefined;
  if (!newName.trim()) throw new Error('Name the new group.');
  const created = await mutate(CreateGroupDocument, { name: newName.trim() });
  return created.createGroup.id;
}

export function FeedDialog({ mode, onClose, onDone }: { mode: Mode; onClose: () => void; onDone: (feedId?: string) => void }) {
  return mode.mode === 'add' ? <AddFeed onClose={onClose} onDone={onDone} /> : <EditFeed id={mode.id} onClose={onClose} onDone={onDone} />;
}

function AddFeed({ onClose, onDone }: { onClose: () => void; onDone: (feedId?: string) => void }) {
  const url = useSignal('');
  const found = useSignal<DiscoverQuery['discoverFeeds'] | null>(null);
  const chosen = useSignal('');
  const group = useSignal(groups.value.find((candidate) => candidate.isDefault)?.id ?? '');
  const newGroup = useSignal('');
  const busy = useSignal(false);
  const error = useSignal<string | null>(null);

  async function discover(event: Event) {
    event.preventDefault();
    busy.value = true;
    error.value = null;
    found.value = null;
    try {
      const data = await query(DiscoverDocument, { url: url.value.trim() });
      found.value = data.discoverFeeds;
      chosen.value = data.discoverFeeds[0]?.url ?? '';
      if (!data.discoverFeeds.length) error.value = 'No feed found at that address. Try the feed’s own URL.';
    } catch (caught) {
      error.value = errorText(caught);
    } finally {
      busy.value = false;
    }
  }

  async function subscribe() {
    busy.value = true;
    error.value = null;
    try {
      const feed = found.value?.find((candidate) => candidate.url === chosen.value);
      const groupId = await resolveGroup(group.value, newGroup.value);
      const created = await mutate(CreateFeedDocument, {
        input: { link: chosen.value, name: feed?.title ?? undefined, groupId },
      });
      await loadFeeds();
      toast(`Subscribed to ${created.createFeed.name}.`);
      onDone(created.createFeed.id);
    } catch (caught) {
      error.value = errorText(caught);
    } finally {
      busy.value = false;
    }
  }

  return (
    <Modal
      title="Add a feed"
      onClose={onClose}
      footer={
        <>
          <button type="button" class="btn" onClick={onClose}>
            Cancel
          </button>
          <button type="button" class="btn primary" disabled={!chosen.value || busy.value} onClick={subscribe}>
            Subscribe
          </button>
        </>
      }
    >
      <form onSubmit={discover}>
        {error.value && (
          <p class="alert error" role="alert">
            {error.value}
          </p>
        )}
        <div class="field">
          <label for="feed-url">Site or feed address</label>
          <div class="row">
            <input
              id="feed-url"
              class="input grow"
              type="url"
              required
              placeholder="https://example.com"
              value={url.value}
              onInput={(event) => (url.value = (event.target as HTMLInputElement).value)}
            />
            <button type="submit" class="btn" disabled={busy.value}>
              {busy.value && !found.value ? 'Looking…' : 'Find feeds'}
            </button>
          </div>
        </div>
      </form>
      {found.value && found.value.length > 0 && (
        <fieldset class="field">
          <legend class="label">Feeds found</legend>
          {found.value.map((feed) => (
            <label class="check" key={feed.url}>
              <input type="radio" name="found" value={feed.url} checked={chosen.value === feed.url} onChange={() => (chosen.value = feed.url)} />
              <span>
                {feed.title ?? feed.url} <span class="hint">({feed.kind}) {feed.url}</span>
              </span>
            </label>
          ))}
        </fieldset>
      )}
      {found.value && found.value.length > 0 && (
        <div class="field">
          <label for="feed-group">Group</label>
          <GroupSelect value={group.value} onChange={(id) => (group.value = id)} />
          {group.value === 'new' && (
            <input class="input" aria-label="New group name" value={newGroup.value} onInput={(event) => (newGroup.value = (event.target as HTMLInputElement).value)} />
          )}
        </div>
      )}
    </Modal>
  );
}

function EditFeed({ id, onClose, onDone }: { id: string; onClose: () => void; onDone: (feedId?: string) => void }) {
  const feed = feeds.value.get(id);
  const name = useSignal(feed?.name ?? '');
  const link = useSignal(feed?.link ?? '');
  const group = useSignal(feed?.group?.id ?? '');
  const newGroup = useSignal('');
  const refresh = useSignal<string>(feed?.refreshIntervalSeconds?.toString() ?? '');
  const suspended = useSignal(feed?.suspended ?? false);
  const options = useSignal<number[]>([]);
  const error = useSignal<string | null>(null);
  const busy = useSignal(false);

  useEffect(() => {
    query(RefreshOptionsDocument, {})
      .then((data) => (options.value = data.refreshIntervalOptions))
      .catch(() => undefined);
  }, []);

  if (!feed) {
    return (
      <Modal title="Feed" onClose={onClose}>
        <p>This feed no longer exists.</p>
      </Modal>
    );
  }
  const state = feed.fetchState;

  async function save() {
    busy.value = true;
    error.value = null;
    try {
      const groupId = await resolveGroup(group.value, newGroup.value);
      const data = await mutate(UpdateFeedDocument, {
        id,
        input: {
          name: name.value.trim(),
          link: link.value.trim(),
          groupId,
          suspended: suspended.value,
          refreshIntervalSeconds: refresh.value ? Number(refresh.value) : null,
        },
      });
      putFeed(data.updateFeed);
      await loadFeeds();
      toast('Feed saved.');
      onDone();
    } catch (caught) {
      error.value = errorText(caught);
    } finally {
      busy.value = false;
    }
  }

  async function remove() {
    if (!confirm(`Unsubscribe from ${feed!.name}? Its articles go too; bookmarks stay.`)) return;
    try {
      await mutate(DeleteFeedDocument, { id });
      await loadFeeds();
      toast('Unsubscribed.');
      onDone();
    } catch (caught) {
      error.value = errorText(caught);
    }
  }

  return (
    <Modal
      title={`Edit ${feed.name}`}
      onClose={onClose}
      footer={
        <>
          <button type="button" class="btn danger" onClick={remove}>
            Unsubscribe
          </button>
          <span class="grow" />
          <button type="button" class="btn" onClick={onClose}>
            Cancel
          </button>
          <button type="button" class="btn primary" disabled={busy.value} onClick={save}>
            Save
          </button>
        </>
      }
    >
      {error.value && (
        <p class="alert error" role="alert">
          {error.value}
        </p>
      )}
      <div class="field">
        <label for="feed-name">Name</label>
        <input id="feed-name" class="input" value={name.value} onInput={(event) => (name.value = (event.target as HTMLInputElement).value)} />
      </div>
      <div class="field">
        <label for="feed-link">Feed address</label>
        <input id="feed-link" class="input" type="url" value={link.value} onInput={(event) => (link.value = (event.target as HTMLInputElement).value)} />
      </div>
      <div class="field">
        <label for="feed-group">Group</label>
        <GroupSelect value={group.value} onChange={(value) => (group.value = value)} />
        {group.value === 'new' && (
          <input class="input" aria-label="New group name" value={newGroup.value} onInput={(event) => (newGroup.value = (event.target as HTMLInputElement).value)} />
        )}
      </div>
      <div class="field">
        <label for="feed-interval">Check for new articles every</label>
        <select id="feed-interval" class="input" value={refresh.value} onChange={(event) => (refresh.value = (event.target as HTMLSelectElement).value)}>
          <option value="">Server default</option>
          {options.value.map((seconds) => (
            <option key={seconds} value={String(seconds)}>
              {interval(seconds)}
            </option>
          ))}
        </select>
      </div>
      <label class="check">
        <input type="checkbox" checked={suspended.value} onChange={(event) => (suspended.value = (event.target as HTMLInputElement).checked)} />
        Suspended (not checked on schedule)
      </label>
      <h3 class="label">Health</h3>
      <dl class="health">
        <dt>Last check</dt>
        <dd>{state?.lastCheckedAt ? new Date(state.lastCheckedAt).toLocaleString() : 'never'}</dd>
        <dt>Last success</dt>
        <dd>{state?.lastSuccessAt ? new Date(state.lastSuccessAt).toLocaleString() : 'never'}</dd>
        <dt>Next check</dt>
        <dd>{state?.nextCheckAt ? new Date(state.nextCheckAt).toLocaleString() : 'due now'}</dd>
        <dt>Failures in a row</dt>
        <dd>{state?.consecutiveFailures ?? 0}</dd>
        {state?.lastError && (
          <>
            <dt>Last error</dt>
            <dd>
              {state.lastError}
              {state.lastErrorAt && <span class="hint"> ({new Date(state.lastErrorAt).toLocaleString()})</span>}
            </dd>
          </>
        )}
      </dl>
      <p>
        <button
          type="button"
          class="btn small"
          onClick={async () => {
            try {
              await mutate(RefreshFeedDocument, { id });
              toast('Checking the feed now.');
            } catch (caught) {
              toast(errorText(caught));
            }
          }}
        >
          Check now
        </button>
      </p>
    </Modal>
  );
}
