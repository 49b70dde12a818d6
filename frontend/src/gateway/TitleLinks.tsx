// Kavita series ↔ AniList media: links a title search proposed wait for
// the viewer to confirm them or name the right media; confirmed ones are
// listed for reference (and can be corrected).
import { useSignal } from '@preact/signals';
import { useEffect } from 'preact/hooks';
import { mutate, query } from '../api/client';
import {
  GatewayConfirmTitleLinkDocument,
  GatewaySetTitleLinkDocument,
  GatewayTitleLinksDocument,
  type GatewayTitleLinkFieldsFragment,
} from '../gql/graphql';
import { Empty, errorText, Failed, Loading } from '../ui/states';
import { TITLE_LINK_SOURCE, TITLE_LINK_STATE } from './labels';
import { Notice, TableScroll, type NoticeState } from './parts';

type TitleLink = GatewayTitleLinkFieldsFragment;

function LinkRow({ link, busy, onConfirm, onSet }: { link: TitleLink; busy: boolean; onConfirm: () => void; onSet: (mediaId: string) => void }) {
  const inputId = `media-${link.seriesId}`;
  return (
    <tr data-series={link.seriesId} data-state={link.state}>
      <th scope="row">{link.seriesName}</th>
      <td>
        {link.mediaId ? (
          <>
            <div>{link.mediaTitle ?? 'Untitled'}</div>
            <div class="mono hint">AniList {link.mediaId}</div>
          </>
        ) : (
          <span class="hint">Nothing found</span>
        )}
      </td>
      <td>
        {TITLE_LINK_STATE[link.state]}
        <div class="hint">from {TITLE_LINK_SOURCE[link.source] ?? link.source.toLowerCase()}</div>
      </td>
      <td>
        <div class="row nowrap">
          {link.state === 'PROPOSED' && link.mediaId && (
            <button type="button" class="btn small primary" disabled={busy} aria-label={`Confirm ${link.mediaTitle ?? link.mediaId} for ${link.seriesName}`} onClick={onConfirm}>
              Confirm
            </button>
          )}
          <form
            class="row nowrap"
            onSubmit={(event) => {
              event.preventDefault();
              const form = event.currentTarget as HTMLFormElement;
              const mediaId = String(new FormData(form).get('mediaId') ?? '').trim();
              if (mediaId) onSet(mediaId);
            }}
          >
            <label class="sr-only" for={inputId}>
              AniList media id for {link.seriesName}
            </label>
            <input id={inputId} name="mediaId" class="input narrow" inputMode="numeric" pattern="[0-9]+" placeholder="AniList id" required />
            <button type="submit" class="btn small" disabled={busy} aria-label={`Set the AniList media for ${link.seriesName}`}>
              Set
            </button>
          </form>
        </div>
      </td>
    </tr>
  );
}

function LinkTable({ links, caption, busy, act }: { links: TitleLink[]; caption: string; busy: string | null; act: (link: TitleLink, mediaId?: string) => void }) {
  return (
    <TableScroll label={caption}>
      <table class="grid title-links">
        <caption class="sr-only">{caption}</caption>
        <thead>
          <tr>
            <th scope="col">Kavita series</th>
            <th scope="col">AniList title</th>
            <th scope="col">State</th>
            <th scope="col">
              <span class="sr-only">Actions</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {links.map((link) => (
            <LinkRow key={link.seriesId} link={link} busy={busy !== null} onConfirm={() => act(link)} onSet={(mediaId) => act(link, mediaId)} />
          ))}
        </tbody>
      </table>
    </TableScroll>
  );
}

export function TitleLinks({ generation }: { generation: number }) {
  const links = useSignal<TitleLink[] | null>(null);
  const error = useSignal<unknown>(null);
  const busy = useSignal<string | null>(null);
  const notice = useSignal<NoticeState>({});

  const load = () =>
    query(GatewayTitleLinksDocument, {})
      .then((data) => {
        links.value = data.titleLinks;
        error.value = null;
      })
      .catch((caught) => (error.value = caught));
  useEffect(() => void load(), [generation]);

  const act = async (link: TitleLink, mediaId?: string) => {
    busy.value = link.seriesId;
    notice.value = {};
    try {
      const updated = mediaId
        ? (await mutate(GatewaySetTitleLinkDocument, { seriesId: link.seriesId, mediaId })).setTitleLink
        : (await mutate(GatewayConfirmTitleLinkDocument, { seriesId: link.seriesId })).confirmTitleLink;
      links.value = (links.value ?? []).map((entry) => (entry.seriesId === updated.seriesId ? updated : entry));
      notice.value = { ok: `${updated.seriesName} is linked to ${updated.mediaTitle ?? `AniList ${updated.mediaId}`}: its reading is scrobbled from now on.` };
    } catch (caught) {
      notice.value = { error: errorText(caught) };
    } finally {
      busy.value = null;
    }
  };

  const all = links.value;
  const proposed = all?.filter((link) => link.state === 'PROPOSED') ?? [];
  const confirmed = all?.filter((link) => link.state === 'CONFIRMED') ?? [];
  return (
    <section class="card" aria-labelledby="title-links-title">
      <h2 id="title-links-title">Title links</h2>
      <p class="hint">Which AniList title each Kavita series is. A link found by a title search is not scrobbled until you confirm it.</p>
      <Notice state={notice.value} />
      {error.value && !all ? (
        <Failed error={error.value} retry={() => void load()} />
      ) : !all ? (
        <Loading label="Loading title links…" />
      ) : !all.length ? (
        <Empty title="No title links yet">A sync from Kavita finds the AniList title of each series you read.</Empty>
      ) : (
        <>
          <h3>To confirm ({proposed.length})</h3>
          {proposed.length ? (
            <LinkTable links={proposed} caption="Title links to confirm" busy={busy.value} act={act} />
          ) : (
            <p class="hint">Nothing waits for you.</p>
          )}
          {confirmed.length > 0 && (
            <details>
              <summary>Confirmed ({confirmed.length})</summary>
              <LinkTable links={confirmed} caption="Confirmed title links" busy={busy.value} act={act} />
            </details>
          )}
        </>
      )}
    </section>
  );
}
