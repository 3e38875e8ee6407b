import type { SearchHit } from '../types';

interface Props {
  query: string;
  hits: SearchHit[] | null;
  onOpen: (hit: SearchHit) => void;
}

/** The query's words marked in a snippet, built as React nodes (no HTML from the backend). */
export function markTerms(snippet: string, query: string) {
  const terms = query
    .split(/\s+/)
    .map((t) => t.replace(/[^\p{L}\p{N}_-]/gu, ''))
    .filter((t) => t.length > 0);
  if (terms.length === 0) return [snippet];
  const pattern = new RegExp(`(${terms.join('|')})`, 'giu');
  return snippet.split(pattern).map((part, i) => (i % 2 === 1 ? <mark key={i}>{part}</mark> : part));
}

export function SearchResults({ query, hits, onOpen }: Props) {
  if (hits === null) return <p className="muted search-status">Searching…</p>;
  if (hits.length === 0) return <p className="muted search-status">Nothing found for “{query}”.</p>;
  return (
    <ul className="search-results" aria-label="Search results">
      {hits.map((hit) => (
        <li key={`${hit.chat_id}:${hit.message_id}`} data-testid="search-result">
          <button type="button" className="search-hit" onClick={() => onOpen(hit)}>
            <span className="chat-title">{hit.title || 'Untitled chat'}</span>
            <span className="snippet">{markTerms(hit.snippet, query)}</span>
          </button>
        </li>
      ))}
    </ul>
  );
}
