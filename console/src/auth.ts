// The API key a person signed in with: kept in sessionStorage (gone with the tab), sent as a bearer
// token by the SDK client (api.ts), never put in a URL.
const KEY = "agentforge.apiKey";

export function apiKey(): string | null {
  return sessionStorage.getItem(KEY);
}

export function signIn(key: string): void {
  sessionStorage.setItem(KEY, key.trim());
}

export function signOut(): void {
  sessionStorage.removeItem(KEY);
}
