// A moment, in the reader's locale, with the exact time for machines.
export function When({ at }: { at: string | null | undefined }) {
  if (!at) return <>—</>;
  const date = new Date(at);
  if (Number.isNaN(date.getTime())) return <>{at}</>;
  return <time dateTime={at}>{date.toLocaleString()}</time>;
}
