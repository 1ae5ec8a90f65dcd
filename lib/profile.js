// confinedProfile (owner: launch). Placeholder.
export function confinedProfile() {
  throw new Error('not implemented');
}
