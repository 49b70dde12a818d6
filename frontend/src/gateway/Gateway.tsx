// The provider gateway pages. The gateway's GraphQL (capabilities, linked
// accounts, receipts) is not on this server's schema yet; this page says so.
import { Empty } from '../ui/states';

export function Gateway() {
  return (
    <div class="page">
      <div class="page-inner">
        <h1>Gateway</h1>
        <Empty title="The provider gateway is not set up on this server">
          Once Trellis brokers reading progress to Kavita and AniList, linked accounts and receipts appear here.
        </Empty>
      </div>
    </div>
  );
}
