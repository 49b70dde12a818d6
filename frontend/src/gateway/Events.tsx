// The viewer's gateway events, newest first, page by page, filtered by
// status and kept live by `gatewayEventUpdated`; events waiting for a
// person (REVIEW, WAITING) can be retried or dismissed.
import { useSignal } from '@preact/signals';
import { useEffect, useRef } from 'preact/hooks';
import { mutate, onReconnect, query, subscribe } from '../api/client';
import {
  GatewayDismissEventDocument,
  GatewayEventUpdatesDocument,
  GatewayEventsDocument,
  GatewayRetryEventDocument,
  type EventStatus,
  type GatewayEventFieldsFragment,
} from '../gql/graphql';
import { Empty, errorText, Failed, Loading } from '../ui/states';
import { EVENT_STATUS, EVENT_STATUSES, PROVIDER_NAME, actionText, applyEventUpdate, canRetryOrDismiss } from './labels';
import { ListMore, Notice, TableScroll, StatusPill, When, type NoticeState, type Paged } from './parts';

type Event = GatewayEventFieldsFragment;
const PAGE = 25;

export function Events({ generation }: { generation: number }) {
  const filter = useSignal<EventStatus | null>(null);
  const page = useSignal<Paged<Event> | null>(null);
  const error = useSignal<unknown>(null);
  const more = useSignal(false);
  const busy = useSignal<string | null>(null);
  const notice = useSignal<NoticeState>({});
  const flashed = useRef(new Map<string, number>());

  const load = (status = filter.value) =>
    query(GatewayEventsDocument, { status, first: PAGE })
      .then((data) => {
        if (status !== filter.value) return;
        const found = data.gatewayEvents;
        page.value = { nodes: found.nodes, hasNextPage: found.pageInfo.hasNextPage, endCursor: found.pageInfo.endCursor ?? null, totalCount: found.totalCount };
        error.value = null;
      })
      .catch((caught) => (error.value = caught));

  const loadMore = async () => {
    const current = page.value;
    if (!current?.endCursor) return;
    more.value = true;
    try {
      const data = await query(GatewayEventsDocument, { status: filter.value, first: PAGE, after: current.endCursor });
      const found = data.gatewayEvents;
      const seen = new Set(current.nodes.map((event) => event.id));
      page.value = {
        nodes: [...current.nodes, ...found.nodes.filter((event) => !seen.has(event.id))],
        hasNextPage: found.pageInfo.hasNextPage,
        endCursor: found.pageInfo.endCursor ?? null,
        totalCount: found.totalCount,
      };
    } catch (caught) {
      notice.value = { error: errorText(caught) };
    } finally {
      more.value = false;
    }
  };

  useEffect(() => void load(), [generation]);

  useEffect(() => {
    const stop = subscribe(
      GatewayEventUpdatesDocument,
      {},
      (data) => {
        const event = data.gatewayEventUpdated;
        const current = page.value;
        if (!current) return;
        const nodes = applyEventUpdate(current.nodes, event, filter.value);
        if (nodes === current.nodes) return;
        flashed.current.set(event.id, performance.now());
        const added = nodes.length - current.nodes.length;
        page.value = { ...current, nodes, totalCount: current.totalCount + added };
      },
      (failure) => {
        if (failure.code === 'EVENTS_LAGGED') void load();
      },
    );
    const stopReconnect = onReconnect(() => void load());
    return () => {
      stop();
      stopReconnect();
    };
  }, []);

  const act = async (event: Event, what: 'retry' | 'dismiss') => {
    busy.value = event.id;
    notice.value = {};
    try {
      const updated =
        what === 'retry'
          ? (await mutate(GatewayRetryEventDocument, { id: event.id })).retryGatewayEvent
          : (await mutate(GatewayDismissEventDocument, { id: event.id })).dismissGatewayEvent;
      if (page.value) page.value = { ...page.value, nodes: applyEventUpdate(page.value.nodes, updated, null) };
      notice.value = { ok: what === 'retry' ? 'Sent back to delivery.' : 'Dismissed: nothing more is sent.' };
    } catch (caught) {
      notice.value = { error: errorText(caught) };
    } finally {
      busy.value = null;
    }
  };

  const now = performance.now();
  const current = page.value;
  return (
    <section class="card" aria-labelledby="events-title">
      <div class="row section-head">
        <h2 id="events-title" class="grow">
          Events
        </h2>
        <label for="events-status" class="hint">
          Status
        </label>
        <select
          id="events-status"
          class="input narrow"
          value={filter.value ?? ''}
          onChange={(change) => {
            const value = (change.target as HTMLSelectElement).value;
            filter.value = value ? (value as EventStatus) : null;
            page.value = null;
            void load(filter.value);
          }}
        >
          <option value="">All</option>
          {EVENT_STATUSES.map((status) => (
            <option key={status} value={status}>
              {EVENT_STATUS[status].label}
            </option>
          ))}
        </select>
      </div>
      <p class="hint">Each change sent to a provider, until a read-back there shows it.</p>
      <Notice state={notice.value} />
      {error.value && !current ? (
        <Failed error={error.value} retry={() => void load()} />
      ) : !current ? (
        <Loading label="Loading events…" />
      ) : !current.nodes.length ? (
        <Empty title={filter.value ? `No events: ${EVENT_STATUS[filter.value].label.toLowerCase()}` : 'No events yet'}>
          Progress, ratings and lists you change, or that a sync brings from Kavita, appear here.
        </Empty>
      ) : (
        <>
          <TableScroll label="Events table">
            <table class="grid events">
              <caption class="sr-only">Gateway events, newest first</caption>
              <thead>
                <tr>
                  <th scope="col">Title</th>
                  <th scope="col">Change</th>
                  <th scope="col">Status</th>
                  <th scope="col">Attempts</th>
                  <th scope="col">Updated</th>
                  <th scope="col">
                    <span class="sr-only">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {current.nodes.map((event) => {
                  const title = `${PROVIDER_NAME[event.provider]} title ${event.titleId}`;
                  return (
                    <tr key={event.id} data-event={event.id} data-status={event.status} class={(flashed.current.get(event.id) ?? -Infinity) > now - 1_200 ? 'flash' : ''}>
                      <td>
                        <div>{PROVIDER_NAME[event.provider]}</div>
                        <div class="mono hint">title {event.titleId}</div>
                      </td>
                      <td>{actionText(event.action, event.value)}</td>
                      <td>
                        <StatusPill look={EVENT_STATUS[event.status]} />
                        {event.reason && <div class="hint reason">{event.reason}</div>}
                      </td>
                      <td>{event.attempts}</td>
                      <td>
                        <When at={event.updatedAt} />
                      </td>
                      <td>
                        {canRetryOrDismiss(event.status) && (
                          <div class="row nowrap">
                            <button type="button" class="btn small" disabled={busy.value !== null} aria-label={`Retry: ${title}`} onClick={() => act(event, 'retry')}>
                              Retry
                            </button>
                            <button type="button" class="btn small" disabled={busy.value !== null} aria-label={`Dismiss: ${title}`} onClick={() => act(event, 'dismiss')}>
                              Dismiss
                            </button>
                          </div>
                        )}
                      </td>
                    </tr>
                  );
                })}
              </tbody>
            </table>
          </TableScroll>
          <ListMore
            shown={current.nodes.length}
            total={current.totalCount}
            hasMore={current.hasNextPage}
            loading={more.value}
            label="Show older events"
            onMore={loadMore}
          />
        </>
      )}
    </section>
  );
}
