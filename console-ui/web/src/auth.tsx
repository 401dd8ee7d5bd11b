import { createContext, useCallback, useContext, useEffect, useMemo, useState, type ReactNode } from 'react';
import { call, configureApi, type LoginAnswer } from './api';
import { KEYS, load, save } from './storage';

export interface Session {
  token: string;
  username: string;
  globalAdmin: boolean;
  /** epoch milliseconds */
  expiresAt: number;
}

interface AuthState {
  session: Session | null;
  /** why the user was sent to the login page, if not by choice */
  notice: 'expired' | null;
  login(username: string, password: string): Promise<void>;
  logout(): void;
  clearNotice(): void;
}

const AuthContext = createContext<AuthState | null>(null);

function readSession(): Session | null {
  const raw = load(KEYS.session);
  if (!raw) return null;
  try {
    const s = JSON.parse(raw) as Session;
    if (typeof s.token !== 'string' || typeof s.expiresAt !== 'number') return null;
    return s;
  } catch {
    return null;
  }
}

// The token the API layer attaches; module level so it is current even
// between a state update and the next render.
let currentToken: string | null = null;

export function AuthProvider({ children }: { children: ReactNode }) {
  const [session, setSession] = useState<Session | null>(() => {
    const s = readSession();
    if (s && s.expiresAt <= Date.now()) return null;
    return s;
  });
  const [notice, setNotice] = useState<'expired' | null>(() => {
    const s = readSession();
    if (s && s.expiresAt <= Date.now()) {
      save(KEYS.session, null);
      return 'expired';
    }
    return null;
  });
  currentToken = session?.token ?? null;

  const expire = useCallback((token?: string) => {
    if (currentToken === null) return;
    // a late answer to a request made with an older token does not end a newer session
    if (token !== undefined && token !== currentToken) return;
    currentToken = null;
    save(KEYS.session, null);
    setSession(null);
    setNotice('expired');
  }, []);

  // Set during render, before any child's effect can start a request.
  configureApi({ token: () => currentToken, expired: expire });

  // Drop the session when the token runs out, even if the user does nothing.
  useEffect(() => {
    if (!session) return;
    const ms = Math.min(session.expiresAt - Date.now(), 2 ** 31 - 1);
    const t = window.setTimeout(() => expire(), Math.max(ms, 0));
    return () => window.clearTimeout(t);
  }, [session, expire]);

  // Log out / in in another tab.
  useEffect(() => {
    const onStorage = (e: StorageEvent) => {
      if (e.key !== KEYS.session) return;
      const s = readSession();
      currentToken = s?.token ?? null;
      setSession(s);
    };
    window.addEventListener('storage', onStorage);
    return () => window.removeEventListener('storage', onStorage);
  }, []);

  const login = useCallback(async (username: string, password: string) => {
    const a = await call<LoginAnswer>('POST', '/nacos/v1/auth/login', { username, password }, { anonymous: true });
    if (!a || typeof a.accessToken !== 'string') throw new Error('unexpected login answer');
    const s: Session = {
      token: a.accessToken,
      username: a.username || username,
      globalAdmin: !!a.globalAdmin,
      expiresAt: Date.now() + (a.tokenTtl > 0 ? a.tokenTtl : 18000) * 1000,
    };
    save(KEYS.session, JSON.stringify(s));
    currentToken = s.token;
    setNotice(null);
    setSession(s);
  }, []);

  const logout = useCallback(() => {
    currentToken = null;
    save(KEYS.session, null);
    // the namespace last shown may be one the next user may not read
    save(KEYS.namespace, null);
    setNotice(null);
    setSession(null);
  }, []);

  const clearNotice = useCallback(() => setNotice(null), []);

  const value = useMemo(
    () => ({ session, notice, login, logout, clearNotice }),
    [session, notice, login, logout, clearNotice],
  );
  return <AuthContext.Provider value={value}>{children}</AuthContext.Provider>;
}

export function useAuth(): AuthState {
  const a = useContext(AuthContext);
  if (!a) throw new Error('useAuth outside AuthProvider');
  return a;
}

export function sessionToken(): string | null {
  return currentToken;
}
