import { useCallback, useEffect, useRef, useState } from 'react';
import * as models from '../services/models';
import { humanError } from '../lib/errors';
import type { LoadedModel, LoadProgress, ModelEntry } from '../types';
import { useNotices } from './useNotices';

export interface ModelsState {
  models: ModelEntry[];
  current: LoadedModel | null;
  /** Set while a model loads. */
  loading: { name: string; progress: LoadProgress } | null;
  refresh: () => Promise<void>;
  load: (name: string) => Promise<LoadedModel | null>;
  unload: () => Promise<void>;
  importPaths: (paths: string[]) => Promise<void>;
  pickAndImport: () => Promise<void>;
  forget: (name: string) => Promise<void>;
}

export function useModels(): ModelsState {
  const { notify } = useNotices();
  const [list, setList] = useState<ModelEntry[]>([]);
  const [current, setCurrent] = useState<LoadedModel | null>(null);
  // `id` ties the state to the load that set it, so nothing from another load can touch it.
  const [loading, setLoading] = useState<(NonNullable<ModelsState['loading']> & { id: number }) | null>(null);
  const loadingRef = useRef(false);
  const loadSeq = useRef(0);

  const refresh = useCallback(async () => {
    try {
      setList(await models.listModels());
    } catch (e) {
      notify('error', `Couldn't list models. ${humanError(e)}`);
    }
  }, [notify]);

  useEffect(() => {
    void refresh();
    models.currentModel().then(setCurrent, () => setCurrent(null));
  }, [refresh]);

  const load = useCallback(
    async (name: string) => {
      if (loadingRef.current) return null;
      loadingRef.current = true;
      const id = ++loadSeq.current;
      // The loading state lasts exactly as long as the command: it ends when load_model
      // settles, whatever its progress Channel still has in flight. Tauri orders a Channel's
      // messages among themselves but not against the command's reply (progress is eval'd
      // into the webview, the reply comes back over the IPC protocol), so the last progress
      // message ("Ready", 100%) can arrive after the reply. Such a message is dropped here;
      // before, it set the state back to "Loading" with nothing left to clear it.
      let settled = false;
      const onProgress = (progress: LoadProgress) => {
        if (settled) return;
        setLoading((prev) => (prev?.id === id ? { id, name, progress } : prev));
      };
      setLoading({ id, name, progress: { stage: 'Starting', fraction: 0 } });
      try {
        const loaded = await models.loadModel(name, onProgress);
        settled = true;
        setCurrent(loaded);
        return loaded;
      } catch (e) {
        settled = true;
        notify('error', `Couldn't load ${name}. ${humanError(e)}`);
        // A failed load leaves whatever the backend kept (normally nothing, or the old model).
        setCurrent(await models.currentModel().catch(() => null));
        return null;
      } finally {
        settled = true;
        loadingRef.current = false;
        setLoading((prev) => (prev?.id === id ? null : prev));
      }
    },
    [notify],
  );

  const unload = useCallback(async () => {
    try {
      await models.unloadModel();
      setCurrent(null);
    } catch (e) {
      notify('error', humanError(e));
    }
  }, [notify]);

  const importPaths = useCallback(
    async (paths: string[]) => {
      for (const path of paths) {
        try {
          const entry = await models.importModel(path);
          notify('info', `Imported ${entry.name}.`);
        } catch (e) {
          notify('error', `Couldn't import ${path}. ${humanError(e)}`);
        }
      }
      await refresh();
    },
    [notify, refresh],
  );

  const pickAndImport = useCallback(async () => {
    try {
      const path = await models.pickGgufFile();
      if (path) await importPaths([path]);
    } catch (e) {
      notify('error', humanError(e));
    }
  }, [importPaths, notify]);

  const forget = useCallback(
    async (name: string) => {
      try {
        await models.forgetModel(name);
        if (current?.name === name) setCurrent(await models.currentModel().catch(() => null));
      } catch (e) {
        notify('error', humanError(e));
      }
      await refresh();
    },
    [current, notify, refresh],
  );

  return { models: list, current, loading, refresh, load, unload, importPaths, pickAndImport, forget };
}
