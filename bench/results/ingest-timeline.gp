set terminal pngcairo size 1000,480 font 'sans,10'
set output 'ingest-timeline.png'
set grid
set key top left
set xlabel 'seconds since the load started'
set ylabel 'requests due, not yet answered'
set title 'walhook-bench ingest: requests due, not yet answered (first run of each)'
plot 'data/ingest-1-000-req-s-walhook.timeline' using 1:2 with lines lw 2 lc 1 title 'walhook, 1,000 req/s', 'data/ingest-1-000-req-s-no-group-commit.timeline' using 1:2 with lines lw 2 lc 2 title 'no-group-commit, 1,000 req/s', 'data/ingest-1-000-req-s-naive.timeline' using 1:2 with lines lw 2 lc 3 title 'naive, 1,000 req/s', 'data/ingest-5-000-req-s-walhook.timeline' using 1:2 with lines lw 2 lc 4 title 'walhook, 5,000 req/s', 'data/ingest-5-000-req-s-no-group-commit.timeline' using 1:2 with lines lw 2 lc 5 title 'no-group-commit, 5,000 req/s', 'data/ingest-5-000-req-s-naive.timeline' using 1:2 with lines lw 2 lc 6 title 'naive, 5,000 req/s', 'data/ingest-ladder-walhook.timeline' using 1:2 with lines lw 2 lc 7 title 'walhook, ladder', 'data/ingest-ladder-no-group-commit.timeline' using 1:2 with lines lw 2 lc 8 title 'no-group-commit, ladder', 'data/ingest-ladder-naive.timeline' using 1:2 with lines lw 2 lc 9 title 'naive, ladder'
