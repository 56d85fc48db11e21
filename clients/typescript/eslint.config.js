// The client package, its example and the contract check are written without a single
// type assertion: every value is typed by the generated schema or narrowed by a check the
// compiler follows. The generated src/schema.ts holds types only.
import tseslint from "typescript-eslint";

export default tseslint.config({
  files: ["src/**/*.ts"],
  ignores: ["src/schema.ts"],
  extends: [tseslint.configs.base],
  rules: {
    "@typescript-eslint/consistent-type-assertions": ["error", { assertionStyle: "never" }],
    "@typescript-eslint/no-non-null-assertion": "error",
    // Not even `as const`: no `as` at all.
    "no-restricted-syntax": ["error", "TSAsExpression", "TSTypeAssertion"],
  },
});
