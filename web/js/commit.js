// Fleet commitments checked in the browser: SHA-256 of the documented text
// `statki-fleet-v1|<ruleset>|<salt hex>|<bow><H|V>,…` (ships in fleet order), computed
// with WebCrypto and compared with the commitment published when the fleet locked.

export function canonicalText(ruleset, salt, ships) {
  const fleet = ships.map((ship) => `${ship.cell}${ship.orientation === 'horizontal' ? 'H' : 'V'}`);
  return `statki-fleet-v1|${ruleset}|${salt}|${fleet.join(',')}`;
}

export async function sha256Hex(text) {
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(text));
  return Array.from(new Uint8Array(digest), (byte) => byte.toString(16).padStart(2, '0')).join('');
}

/** {text, computed, matches}: whether the opened fleet hashes to the published commitment. */
export async function verifyFleet(ruleset, opened) {
  if (!opened || !opened.salt || !opened.commitment || opened.ships.some((ship) => !ship)) {
    return { text: null, computed: null, matches: false };
  }
  const text = canonicalText(ruleset, opened.salt, opened.ships);
  const computed = await sha256Hex(text);
  return { text, computed, matches: computed === opened.commitment };
}
