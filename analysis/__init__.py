"""What passes and code generation ask of the IR, shared by them: index algebra of loop bodies
(views, flat offsets), MemoryDeps and loop merging, shared loop nests, views as
reinterpretations. No pass lives here (passes/ holds those, one per file)."""
