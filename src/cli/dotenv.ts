export interface SecretPair {
  key: string;
  value: string;
}

export function formatJson(secrets: SecretPair[]): string {
  return `${JSON.stringify(Object.fromEntries(secrets.map((s) => [s.key, s.value])), null, 2)}\n`;
}
