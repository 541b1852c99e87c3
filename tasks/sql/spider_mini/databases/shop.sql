CREATE TABLE suppliers (
  supplier_id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  country TEXT,
  contact_email TEXT
);

CREATE TABLE products (
  product_id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  category TEXT,
  supplier_id INTEGER,
  unit_price REAL,
  stock INTEGER,
  FOREIGN KEY (supplier_id) REFERENCES suppliers(supplier_id)
);

CREATE TABLE customers (
  customer_id INTEGER PRIMARY KEY,
  first_name TEXT NOT NULL,
  last_name TEXT NOT NULL,
  city TEXT,
  signup_date TEXT,
  loyalty_tier TEXT
);

CREATE TABLE orders (
  order_id INTEGER PRIMARY KEY,
  customer_id INTEGER NOT NULL,
  order_date TEXT,
  status TEXT,
  shipping_cost REAL,
  FOREIGN KEY (customer_id) REFERENCES customers(customer_id)
);

CREATE TABLE order_items (
  order_item_id INTEGER PRIMARY KEY,
  order_id INTEGER NOT NULL,
  product_id INTEGER NOT NULL,
  quantity INTEGER,
  unit_price REAL,
  FOREIGN KEY (order_id) REFERENCES orders(order_id),
  FOREIGN KEY (product_id) REFERENCES products(product_id)
);

INSERT INTO suppliers VALUES (1, 'Nordic Goods AB', 'Sweden', 'sales@nordicgoods.se');
INSERT INTO suppliers VALUES (2, 'Pacific Trading Co', 'Japan', 'info@pacifictrading.jp');
INSERT INTO suppliers VALUES (3, 'Andes Crafts', 'Peru', NULL);
INSERT INTO suppliers VALUES (4, 'Blue Ridge Supply', 'United States', 'orders@blueridge.com');
INSERT INTO suppliers VALUES (5, 'Rhein Werkzeug GmbH', 'Germany', 'kontakt@rheinwerkzeug.de');
INSERT INTO suppliers VALUES (6, 'Maple Leaf Outfitters', 'Canada', 'hello@mapleleaf.ca');
INSERT INTO suppliers VALUES (7, 'Lotus Textiles', 'India', NULL);
INSERT INTO suppliers VALUES (8, 'Sierra Coffee Imports', 'United States', 'buy@sierracoffee.com');

INSERT INTO products VALUES (1, 'Wool Throw Blanket', 'Home', 1, 59.9, 40);
INSERT INTO products VALUES (2, 'Ceramic Pour-Over Set', 'Kitchen', 2, 34.5, 25);
INSERT INTO products VALUES (3, 'Alpaca Scarf', 'Apparel', 3, 42.0, 18);
INSERT INTO products VALUES (4, 'Cast Iron Skillet', 'Kitchen', 4, 39.95, 30);
INSERT INTO products VALUES (5, 'Cordless Drill', 'Tools', 5, 129.0, 12);
INSERT INTO products VALUES (6, 'Rain Jacket', 'Apparel', 6, 89.99, 22);
INSERT INTO products VALUES (7, 'Bamboo Cutting Board', 'Kitchen', 2, 19.5, 60);
INSERT INTO products VALUES (8, 'Hiking Backpack', 'Outdoor', 6, 74.0, 15);
INSERT INTO products VALUES (9, 'Socket Wrench Set', 'Tools', 5, 54.25, 20);
INSERT INTO products VALUES (10, 'Espresso Beans 1kg', 'Grocery', 8, 24.0, 100);
INSERT INTO products VALUES (11, 'Linen Pillow Cover', 'Home', 1, 18.75, 45);
INSERT INTO products VALUES (12, 'Hand-Woven Basket', 'Home', 3, 27.0, 0);
INSERT INTO products VALUES (13, 'Camping Lantern', 'Outdoor', 4, 31.5, 35);
INSERT INTO products VALUES (14, 'Green Tea Sampler', 'Grocery', 2, 15.0, 80);
INSERT INTO products VALUES (15, 'Leather Work Gloves', 'Tools', 4, 22.5, 0);
INSERT INTO products VALUES (16, 'Down Vest', 'Apparel', 6, 110.0, 9);
INSERT INTO products VALUES (17, 'Decaf Beans 500g', 'Grocery', 8, 13.25, 55);
INSERT INTO products VALUES (18, 'Table Saw', 'Tools', 5, 449.0, 4);
INSERT INTO products VALUES (19, 'Merino Socks', 'Apparel', 1, 16.0, 70);
INSERT INTO products VALUES (20, 'Scented Candle', 'Home', NULL, 12.0, 38);

INSERT INTO customers VALUES (1, 'Olivia', 'Bennett', 'Chicago', '2021-03-12', 'Gold');
INSERT INTO customers VALUES (2, 'Noah', 'Fischer', 'Austin', '2022-07-19', 'Silver');
INSERT INTO customers VALUES (3, 'Emma', 'Rodriguez', 'Chicago', '2020-11-02', 'Gold');
INSERT INTO customers VALUES (4, 'Liam', 'O''Brien', 'Denver', '2023-01-25', NULL);
INSERT INTO customers VALUES (5, 'Ava', 'Kowalski', 'Austin', '2021-09-14', 'Bronze');
INSERT INTO customers VALUES (6, 'Sophia', 'Lee', 'Seattle', '2022-02-28', 'Silver');
INSERT INTO customers VALUES (7, 'Mason', 'Patel', 'Denver', '2023-06-10', 'Bronze');
INSERT INTO customers VALUES (8, 'Isabella', 'Nakamura', 'Chicago', '2020-05-05', 'Gold');
INSERT INTO customers VALUES (9, 'Ethan', 'Murphy', 'Seattle', '2024-01-08', NULL);
INSERT INTO customers VALUES (10, 'Mia', 'Johansson', 'Austin', '2022-10-30', 'Silver');
INSERT INTO customers VALUES (11, 'Lucas', 'Bennett', 'Boston', '2023-08-17', 'Bronze');
INSERT INTO customers VALUES (12, 'Amara', 'Eze', 'Boston', '2021-12-01', NULL);
INSERT INTO customers VALUES (13, 'Jacob', 'Weber', 'Chicago', '2024-02-20', NULL);
INSERT INTO customers VALUES (14, 'Chloe', 'Martin', 'Seattle', '2020-08-09', 'Gold');

INSERT INTO orders VALUES (1, 1, '2023-01-14', 'Delivered', 5.99);
INSERT INTO orders VALUES (2, 2, '2023-02-03', 'Delivered', 0.0);
INSERT INTO orders VALUES (3, 3, '2023-02-18', 'Delivered', 7.5);
INSERT INTO orders VALUES (4, 1, '2023-03-22', 'Delivered', 0.0);
INSERT INTO orders VALUES (5, 5, '2023-04-09', 'Cancelled', 5.99);
INSERT INTO orders VALUES (6, 6, '2023-05-15', 'Delivered', 12.0);
INSERT INTO orders VALUES (7, 8, '2023-06-01', 'Delivered', 0.0);
INSERT INTO orders VALUES (8, 4, '2023-06-27', 'Delivered', 5.99);
INSERT INTO orders VALUES (9, 10, '2023-07-30', 'Delivered', 7.5);
INSERT INTO orders VALUES (10, 3, '2023-08-12', 'Delivered', 0.0);
INSERT INTO orders VALUES (11, 7, '2023-09-05', 'Cancelled', 5.99);
INSERT INTO orders VALUES (12, 11, '2023-10-21', 'Delivered', 9.25);
INSERT INTO orders VALUES (13, 12, '2023-11-11', 'Delivered', 5.99);
INSERT INTO orders VALUES (14, 14, '2023-11-24', 'Delivered', 0.0);
INSERT INTO orders VALUES (15, 1, '2023-12-03', 'Delivered', 0.0);
INSERT INTO orders VALUES (16, 8, '2024-01-16', 'Shipped', 7.5);
INSERT INTO orders VALUES (17, 2, '2024-02-08', 'Shipped', 5.99);
INSERT INTO orders VALUES (18, 6, '2024-02-29', 'Processing', 12.0);
INSERT INTO orders VALUES (19, 14, '2024-03-10', 'Processing', 0.0);
INSERT INTO orders VALUES (20, 3, '2024-03-15', 'Processing', NULL);
INSERT INTO orders VALUES (21, 5, '2024-03-18', 'Processing', NULL);
INSERT INTO orders VALUES (22, 3, '2024-03-20', 'Cancelled', 7.5);

INSERT INTO order_items VALUES (1, 1, 1, 1, 59.9);
INSERT INTO order_items VALUES (2, 1, 11, 2, 18.75);
INSERT INTO order_items VALUES (3, 2, 10, 3, 24.0);
INSERT INTO order_items VALUES (4, 2, 2, 1, 34.5);
INSERT INTO order_items VALUES (5, 3, 5, 1, 129.0);
INSERT INTO order_items VALUES (6, 3, 9, 1, 54.25);
INSERT INTO order_items VALUES (7, 4, 19, 4, 16.0);
INSERT INTO order_items VALUES (8, 5, 6, 1, 89.99);
INSERT INTO order_items VALUES (9, 6, 8, 1, 74.0);
INSERT INTO order_items VALUES (10, 6, 13, 2, 31.5);
INSERT INTO order_items VALUES (11, 7, 1, 2, 55.0);
INSERT INTO order_items VALUES (12, 7, 3, 1, 42.0);
INSERT INTO order_items VALUES (13, 8, 4, 1, 39.95);
INSERT INTO order_items VALUES (14, 8, 7, 2, 19.5);
INSERT INTO order_items VALUES (15, 9, 14, 5, 15.0);
INSERT INTO order_items VALUES (16, 9, 10, 2, 24.0);
INSERT INTO order_items VALUES (17, 10, 16, 1, 110.0);
INSERT INTO order_items VALUES (18, 10, 6, 1, 89.99);
INSERT INTO order_items VALUES (19, 11, 15, 3, 22.5);
INSERT INTO order_items VALUES (20, 12, 12, 2, 27.0);
INSERT INTO order_items VALUES (21, 12, 11, 1, 18.75);
INSERT INTO order_items VALUES (22, 13, 17, 4, 13.25);
INSERT INTO order_items VALUES (23, 13, 10, 1, 24.0);
INSERT INTO order_items VALUES (24, 14, 5, 1, 119.0);
INSERT INTO order_items VALUES (25, 14, 9, 1, 54.25);
INSERT INTO order_items VALUES (26, 15, 3, 2, 42.0);
INSERT INTO order_items VALUES (27, 15, 19, 3, 16.0);
INSERT INTO order_items VALUES (28, 16, 8, 1, 74.0);
INSERT INTO order_items VALUES (29, 16, 13, 1, 31.5);
INSERT INTO order_items VALUES (30, 17, 2, 2, 34.5);
INSERT INTO order_items VALUES (31, 18, 16, 1, 110.0);
INSERT INTO order_items VALUES (32, 19, 7, 3, 19.5);
INSERT INTO order_items VALUES (33, 19, 4, 1, 39.95);
INSERT INTO order_items VALUES (34, 20, 10, 2, 24.0);
INSERT INTO order_items VALUES (35, 20, 14, 2, 15.0);
INSERT INTO order_items VALUES (36, 21, 1, 1, 59.9);
INSERT INTO order_items VALUES (37, 22, 6, 1, 89.99);
INSERT INTO order_items VALUES (38, 3, 15, 2, 22.5);
INSERT INTO order_items VALUES (39, 7, 19, 2, 16.0);
INSERT INTO order_items VALUES (40, 15, 17, 2, 13.25);
