// Settings (#/settings): one section per component in settings/: you (your name), the
// connection profiles (write-only keys, test, edit, fallbacks), the generation settings
// (world info, prompt, reasoning, compatibility), the memory settings and the global
// variables ({{getglobalvar}}), and when the last verified backup was made. A chat's own
// variables use the same editor (chat/side.js).

import { h } from "./dom.js";
import { t } from "./i18n.js";
import { backupsSection } from "./settings/backups.js";
import { generationSection } from "./settings/generation.js";
import { languageSection } from "./settings/language.js";
import { memorySection } from "./settings/memory.js";
import { profilesSection } from "./settings/profiles.js";
import { utilitySection } from "./settings/utility.js";
import { variablesSection } from "./settings/variables.js";
import { youSection } from "./settings/you.js";

export { variablesSection };

export async function showSettings(view) {
  const [you, profiles, utility, generation, variables, backups] = await Promise.all([
    youSection(),
    profilesSection(),
    utilitySection(),
    generationSection(),
    variablesSection("/variables", t("Global variables")),
    backupsSection(),
  ]);
  view.append(h("h1", {}, t("Settings")), you, languageSection(), profiles, utility, generation, memorySection(), variables, backups);
}
