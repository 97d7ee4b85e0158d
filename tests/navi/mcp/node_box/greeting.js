// node_modules/tiny-greeting/index.js: a dependency found from the package's root.
export function greet(name) {
  return `hello ${name}, from a sandboxed node server`;
}
