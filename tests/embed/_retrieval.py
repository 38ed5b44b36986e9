"""A small retrieval check for the embedder (also used by benchmarks/embed.py): lorebook-like
passages, and one question per passage that shares few of its words."""

from __future__ import annotations

#: (passage, a question it answers)
PAIRS: tuple[tuple[str, str], ...] = (
    (
        "The lighthouse on Gull Rock was built in 1820 and its lamp still burns whale oil.",
        "How old is the tower that guides ships near the rock?",
    ),
    (
        "Wren keeps a grey cat named Soot who sleeps on the warm lens housing.",
        "Does the keeper have a pet animal?",
    ),
    (
        "The harbour town of Saltmere trades dried cod and wool with the southern isles.",
        "What goods does the port sell to the islands?",
    ),
    (
        "Storm season runs from late autumn to early spring, when the ferry stops running.",
        "When can't you take the boat across because of bad weather?",
    ),
    (
        "The old smuggler tunnels under the cliffs flood at every high tide.",
        "Are the secret passages beneath the cliffs safe when the sea rises?",
    ),
    (
        "Mira runs the Red Griffin tavern and brews a dark ale flavoured with juniper.",
        "Who owns the inn, and what beer does she make?",
    ),
    (
        "A shipwreck in 1893 left forty sailors stranded on the rocks for three nights.",
        "Tell me about the disaster when a vessel sank and its crew was marooned.",
    ),
    (
        "The mayor of Saltmere is elected every four years by the fishing guilds.",
        "How is the town's leader chosen?",
    ),
    (
        "Fog horns sound twice a minute whenever visibility drops below a mile.",
        "What signal warns boats when the mist gets thick?",
    ),
    (
        "The keeper's log records every passing ship, the weather, and the oil burned each night.",
        "What does the journal of the lighthouse contain?",
    ),
    (
        "Wild ponies graze the moor above the village and are rounded up each August.",
        "What horses live on the hills, and when are they gathered?",
    ),
    (
        "A silver bell from the drowned chapel is said to ring beneath the waves on calm nights.",
        "What is the legend about a sound coming from under the sea?",
    ),
)
