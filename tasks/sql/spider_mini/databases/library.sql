CREATE TABLE authors (
  author_id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  nationality TEXT,
  birth_year INTEGER
);

CREATE TABLE books (
  book_id INTEGER PRIMARY KEY,
  title TEXT NOT NULL,
  author_id INTEGER,
  genre TEXT,
  publish_year INTEGER,
  price REAL,
  copies INTEGER,
  FOREIGN KEY (author_id) REFERENCES authors(author_id)
);

CREATE TABLE members (
  member_id INTEGER PRIMARY KEY,
  first_name TEXT NOT NULL,
  last_name TEXT NOT NULL,
  city TEXT,
  join_date TEXT,
  email TEXT
);

CREATE TABLE loans (
  loan_id INTEGER PRIMARY KEY,
  book_id INTEGER NOT NULL,
  member_id INTEGER NOT NULL,
  loan_date TEXT,
  due_date TEXT,
  return_date TEXT,
  fine REAL,
  FOREIGN KEY (book_id) REFERENCES books(book_id),
  FOREIGN KEY (member_id) REFERENCES members(member_id)
);

INSERT INTO authors VALUES (1, 'Margaret Atwood', 'Canada', 1939);
INSERT INTO authors VALUES (2, 'Haruki Murakami', 'Japan', 1949);
INSERT INTO authors VALUES (3, 'Chimamanda Ngozi Adichie', 'Nigeria', 1977);
INSERT INTO authors VALUES (4, 'Kazuo Ishiguro', 'United Kingdom', 1954);
INSERT INTO authors VALUES (5, 'Toni Morrison', 'United States', 1931);
INSERT INTO authors VALUES (6, 'Gabriel Garcia Marquez', 'Colombia', 1927);
INSERT INTO authors VALUES (7, 'Zadie Smith', 'United Kingdom', 1975);
INSERT INTO authors VALUES (8, 'Orhan Pamuk', 'Turkey', 1952);
INSERT INTO authors VALUES (9, 'Ursula K. Le Guin', 'United States', 1929);
INSERT INTO authors VALUES (10, 'Elena Ferrante', 'Italy', NULL);
INSERT INTO authors VALUES (11, 'Ted Chiang', 'United States', 1967);
INSERT INTO authors VALUES (12, 'Olga Tokarczuk', 'Poland', 1962);

INSERT INTO books VALUES (1, 'The Handmaid''s Tale', 1, 'Dystopian', 1985, 14.99, 4);
INSERT INTO books VALUES (2, 'Oryx and Crake', 1, 'Science Fiction', 2003, 16.5, 2);
INSERT INTO books VALUES (3, 'Norwegian Wood', 2, 'Literary Fiction', 1987, 13.0, 3);
INSERT INTO books VALUES (4, 'Kafka on the Shore', 2, 'Magical Realism', 2002, 15.75, 2);
INSERT INTO books VALUES (5, '1Q84', 2, 'Magical Realism', 2009, 24.0, 1);
INSERT INTO books VALUES (6, 'Americanah', 3, 'Literary Fiction', 2013, 17.25, 3);
INSERT INTO books VALUES (7, 'Half of a Yellow Sun', 3, 'Historical Fiction', 2006, 15.5, 2);
INSERT INTO books VALUES (8, 'Never Let Me Go', 4, 'Science Fiction', 2005, 12.5, 5);
INSERT INTO books VALUES (9, 'The Remains of the Day', 4, 'Literary Fiction', 1989, 11.99, 3);
INSERT INTO books VALUES (10, 'Klara and the Sun', 4, 'Science Fiction', 2021, 19.99, 2);
INSERT INTO books VALUES (11, 'Beloved', 5, 'Historical Fiction', 1987, 13.5, 4);
INSERT INTO books VALUES (12, 'Song of Solomon', 5, 'Literary Fiction', 1977, 12.75, 1);
INSERT INTO books VALUES (13, 'One Hundred Years of Solitude', 6, 'Magical Realism', 1967, 18.0, 3);
INSERT INTO books VALUES (14, 'Love in the Time of Cholera', 6, 'Romance', 1985, 14.25, 2);
INSERT INTO books VALUES (15, 'White Teeth', 7, 'Literary Fiction', 2000, 13.95, 2);
INSERT INTO books VALUES (16, 'My Name Is Red', 8, 'Historical Fiction', 1998, 16.0, 1);
INSERT INTO books VALUES (17, 'The Left Hand of Darkness', 9, 'Science Fiction', 1969, 10.5, 3);
INSERT INTO books VALUES (18, 'A Wizard of Earthsea', 9, 'Fantasy', 1968, 9.99, 4);
INSERT INTO books VALUES (19, 'My Brilliant Friend', 10, 'Literary Fiction', 2011, 15.0, 2);
INSERT INTO books VALUES (20, 'Stories of Your Life and Others', 11, 'Science Fiction', 2002, NULL, 2);
INSERT INTO books VALUES (21, 'Exhalation', 11, 'Science Fiction', 2019, 21.5, 1);
INSERT INTO books VALUES (22, 'The Dispossessed', 9, 'Science Fiction', 1974, 11.25, 2);

INSERT INTO members VALUES (1, 'Alice', 'Nguyen', 'Portland', '2019-03-14', 'alice.nguyen@example.com');
INSERT INTO members VALUES (2, 'Brian', 'O''Connor', 'Seattle', '2020-07-02', NULL);
INSERT INTO members VALUES (3, 'Carmen', 'Diaz', 'Portland', '2018-11-21', 'carmen.d@example.com');
INSERT INTO members VALUES (4, 'David', 'Kim', 'Eugene', '2021-01-09', 'dkim@example.com');
INSERT INTO members VALUES (5, 'Emma', 'Schultz', 'Seattle', '2022-05-30', NULL);
INSERT INTO members VALUES (6, 'Farid', 'Haddad', 'Portland', '2017-09-15', 'farid.h@example.com');
INSERT INTO members VALUES (7, 'Grace', 'Liu', 'Salem', '2023-02-11', 'grace.liu@example.com');
INSERT INTO members VALUES (8, 'Henry', 'McAllister', 'Eugene', '2019-08-23', NULL);
INSERT INTO members VALUES (9, 'Isabel', 'Rossi', 'Seattle', '2021-06-17', 'irossi@example.com');
INSERT INTO members VALUES (10, 'Jamal', 'Wright', 'Portland', '2020-12-01', 'jamal.w@example.com');
INSERT INTO members VALUES (11, 'Kenji', 'Tanaka', 'Salem', '2024-01-05', NULL);
INSERT INTO members VALUES (12, 'Laura', 'Nguyen', 'Eugene', '2018-04-19', 'laura.n@example.com');
INSERT INTO members VALUES (13, 'Mateo', 'Fernandez', 'Portland', '2024-03-22', 'mateo.f@example.com');
INSERT INTO members VALUES (14, 'Nora', 'deVries', 'Seattle', '2016-10-30', 'nora.dv@example.com');

INSERT INTO loans VALUES (1, 1, 1, '2023-01-05', '2023-01-26', '2023-01-20', 0.0);
INSERT INTO loans VALUES (2, 3, 1, '2023-02-10', '2023-03-03', '2023-03-10', 1.75);
INSERT INTO loans VALUES (3, 8, 2, '2023-01-15', '2023-02-05', '2023-02-01', 0.0);
INSERT INTO loans VALUES (4, 13, 3, '2023-02-01', '2023-02-22', '2023-02-20', 0.0);
INSERT INTO loans VALUES (5, 6, 3, '2023-03-12', '2023-04-02', '2023-04-15', 3.25);
INSERT INTO loans VALUES (6, 11, 4, '2023-03-20', '2023-04-10', '2023-04-08', 0.0);
INSERT INTO loans VALUES (7, 5, 5, '2023-04-02', '2023-04-23', NULL, NULL);
INSERT INTO loans VALUES (8, 17, 6, '2023-04-11', '2023-05-02', '2023-04-30', 0.0);
INSERT INTO loans VALUES (9, 18, 6, '2023-05-03', '2023-05-24', '2023-05-22', 0.0);
INSERT INTO loans VALUES (10, 1, 6, '2023-06-14', '2023-07-05', '2023-07-12', 1.75);
INSERT INTO loans VALUES (11, 12, 8, '2023-06-20', '2023-07-11', '2023-07-09', 0.0);
INSERT INTO loans VALUES (12, 4, 9, '2023-07-01', '2023-07-22', '2023-08-05', 3.5);
INSERT INTO loans VALUES (13, 8, 10, '2023-07-15', '2023-08-05', '2023-08-01', 0.0);
INSERT INTO loans VALUES (14, 19, 12, '2023-08-02', '2023-08-23', '2023-08-20', 0.0);
INSERT INTO loans VALUES (15, 14, 14, '2023-08-19', '2023-09-09', '2023-09-30', 5.25);
INSERT INTO loans VALUES (16, 13, 1, '2023-09-03', '2023-09-24', '2023-09-21', 0.0);
INSERT INTO loans VALUES (17, 10, 2, '2023-09-10', '2023-10-01', NULL, NULL);
INSERT INTO loans VALUES (18, 21, 4, '2023-10-05', '2023-10-26', '2023-10-25', 0.0);
INSERT INTO loans VALUES (19, 1, 9, '2023-10-12', '2023-11-02', '2023-11-01', 0.0);
INSERT INTO loans VALUES (20, 15, 10, '2023-11-01', '2023-11-22', '2023-11-29', 1.75);
INSERT INTO loans VALUES (21, 2, 12, '2023-11-18', '2023-12-09', '2023-12-08', 0.0);
INSERT INTO loans VALUES (22, 16, 14, '2023-12-01', '2023-12-22', NULL, NULL);
INSERT INTO loans VALUES (23, 8, 12, '2024-01-08', '2024-01-29', '2024-01-25', 0.0);
INSERT INTO loans VALUES (24, 20, 3, '2024-01-20', '2024-02-10', '2024-02-09', 0.0);
INSERT INTO loans VALUES (25, 11, 8, '2024-02-02', '2024-02-23', '2024-03-01', 1.75);
INSERT INTO loans VALUES (26, 11, 10, '2024-02-14', '2024-03-06', NULL, NULL);
INSERT INTO loans VALUES (27, 6, 1, '2024-03-01', '2024-03-22', '2024-03-20', 0.0);
INSERT INTO loans VALUES (28, 13, 5, '2024-03-10', '2024-03-31', '2024-03-28', 0.0);
INSERT INTO loans VALUES (29, 22, 9, '2024-03-18', '2024-04-08', NULL, NULL);
INSERT INTO loans VALUES (30, 1, 14, '2024-04-01', '2024-04-22', '2024-04-19', 0.0);
