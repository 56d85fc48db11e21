// Bot games this browser started for its player (the guest's first game, a lobby "Play"):
// one left before its battle began is ended, not kept listed as in play until its
// placement clock runs out.

const KEY = 'statki.botgames';
const KEPT = 20;

function kept() {
  try {
    const ids = JSON.parse(localStorage.getItem(KEY) || '[]');
    return Array.isArray(ids) ? ids : [];
  } catch {
    return [];
  }
}

/** Notes that `matchId` is a bot game this browser started. */
export function rememberBotGame(matchId) {
  const ids = kept().filter((id) => id !== matchId);
  localStorage.setItem(KEY, JSON.stringify([...ids.slice(-(KEPT - 1)), matchId]));
}

/** Whether `matchId` is a bot game this browser started. */
export function isBotGame(matchId) {
  return kept().includes(matchId);
}

export function forgetBotGame(matchId) {
  localStorage.setItem(KEY, JSON.stringify(kept().filter((id) => id !== matchId)));
}
