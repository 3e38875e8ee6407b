import { createContext, useCallback, useContext, useMemo, useRef, useState, type ReactNode } from 'react';

export type NoticeKind = 'error' | 'info';

export interface Notice {
  id: number;
  kind: NoticeKind;
  text: string;
}

interface NoticeApi {
  notices: Notice[];
  notify: (kind: NoticeKind, text: string) => void;
  dismiss: (id: number) => void;
}

const NoticeContext = createContext<NoticeApi | null>(null);

const INFO_MS = 5000;

export function NoticeProvider({ children }: { children: ReactNode }) {
  const [notices, setNotices] = useState<Notice[]>([]);
  const nextId = useRef(1);

  const dismiss = useCallback((id: number) => {
    setNotices((list) => list.filter((n) => n.id !== id));
  }, []);

  const notify = useCallback(
    (kind: NoticeKind, text: string) => {
      const id = nextId.current++;
      // The same error twice in a row is shown once.
      setNotices((list) => (list.some((n) => n.text === text) ? list : [...list, { id, kind, text }]));
      if (kind === 'info') setTimeout(() => dismiss(id), INFO_MS);
    },
    [dismiss],
  );

  const api = useMemo(() => ({ notices, notify, dismiss }), [notices, notify, dismiss]);
  return <NoticeContext.Provider value={api}>{children}</NoticeContext.Provider>;
}

export function useNotices(): NoticeApi {
  const api = useContext(NoticeContext);
  if (!api) throw new Error('useNotices outside NoticeProvider');
  return api;
}
