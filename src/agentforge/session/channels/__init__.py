"""Side channels of a session beside the turn: commands, the shell route, subtasks, questions,
fork, edits, titles and todos."""
