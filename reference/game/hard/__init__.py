"""The auditing game's hard tier (SPEC §9, semantics game-v2): what is drawn, how it is
planted, and how a build confirms it."""
