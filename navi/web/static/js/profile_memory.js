// The profile a new chat starts with: the one picked last on this browser
// (localStorage), else the current one, else the first.

import { profileById, state } from './state.js';

const PROFILE_KEY = 'navi.profile';

export function rememberedProfile() {
  let saved = null;
  try {
    saved = localStorage.getItem(PROFILE_KEY);
  } catch {
    saved = null;
  }
  if (saved && profileById(saved)) return saved;
  if (state.profileId && profileById(state.profileId)) return state.profileId;
  return state.profiles[0]?.id || null;
}

export function rememberProfile(profileId) {
  try {
    localStorage.setItem(PROFILE_KEY, profileId);
  } catch {
    // No storage: the choice lasts for this page.
  }
}
