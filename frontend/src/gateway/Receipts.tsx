// The viewer's receipts: each a change a provider confirmed by read-back,
// newest first, page by page.
import { useSignal } from '@preact/signals';
import { useEffect } from 'preact/hooks';
import { query } from '../api/client';
import { GatewayReceiptsDocument, type GatewayReceiptsQuery } from '../gql/graphql';
import { Empty, errorText, Failed, Loading } from '../ui/states';
import { PROVIDER_NAME, actionText } from './labels';
import { ListMore, Notice, TableScroll, When, type NoticeState, type Paged } from './parts';

type Receipt = GatewayReceiptsQuery['receipts']['nodes'][number];
const PAGE = 25;

export function Receipts({ generation }: { generation: number }) {
  const page = useSignal<Paged<Receipt> | null>(null);
  const error = useSignal<unknown>(null);
  const more = useSignal(false);
  const notice = useSignal<NoticeState>({});

  const load = () =>
    query(GatewayReceiptsDocument, { first: PAGE })
      .then((data) => {
        const found = data.receipts;
        page.value = { nodes: found.nodes, hasNextPage: found.pageInfo.hasNextPage, endCursor: found.pageInfo.endCursor ?? null, totalCount: found.totalCount };
        error.value = null;
      })
      .catch((caught) => (error.value = caught));

  const loadMore = async () => {
    const current = page.value;
    if (!current?.endCursor) return;
    more.value = true;
    try {
      const found = (await query(GatewayReceiptsDocument, { first: PAGE, after: current.endCursor })).receipts;
      page.value = {
        nodes: [...current.nodes, ...found.nodes],
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

  const current = page.value;
  return (
    <section class="card" aria-labelledby="receipts-title">
      <h2 id="receipts-title">Receipts</h2>
      <p class="hint">Changes a provider showed back to us: each is done, and is never sent again.</p>
      <Notice state={notice.value} />
      {error.value && !current ? (
        <Failed error={error.value} retry={() => void load()} />
      ) : !current ? (
        <Loading label="Loading receipts…" />
      ) : !current.nodes.length ? (
        <Empty title="No receipts yet">A receipt is written when a provider confirms a change.</Empty>
      ) : (
        <>
          <TableScroll label="Receipts table">
            <table class="grid receipts">
              <caption class="sr-only">Receipts, newest first</caption>
              <thead>
                <tr>
                  <th scope="col">Title</th>
                  <th scope="col">Change</th>
                  <th scope="col">Confirmed</th>
                  <th scope="col">Kept until</th>
                </tr>
              </thead>
              <tbody>
                {current.nodes.map((receipt) => (
                  <tr key={receipt.eventId}>
                    <td>
                      <div>{receipt.provider ? PROVIDER_NAME[receipt.provider] : 'Unknown provider'}</div>
                      <div class="mono hint">title {receipt.titleId}</div>
                    </td>
                    <td>{actionText(receipt.action)}</td>
                    <td>
                      <When at={receipt.createdAt} />
                    </td>
                    <td>{receipt.retention === 'PROTECTED' ? 'Kept (a removal is never repeated)' : <When at={receipt.expiresAt} />}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </TableScroll>
          <ListMore
            shown={current.nodes.length}
            total={current.totalCount}
            hasMore={current.hasNextPage}
            loading={more.value}
            label="Show older receipts"
            onMore={loadMore}
          />
        </>
      )}
    </section>
  );
}
